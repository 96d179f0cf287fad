// Text from outside (a partner's name, a ledger note, a webhook body, a contact's name) shown
// on a terminal is shown, never obeyed: every character a terminal acts on is written out as a
// visible \u escape instead. That covers C0 controls (ESC, so no CSI/OSC/DCS sequence can
// start: no colours, no retitled window, no OSC 8 link, no OSC 52 clipboard write), DEL, C1
// controls (0x9b is a one-byte CSI on some terminals) and the bidi overrides and isolates that
// make text read in another order than it is stored (U+202A-U+202E, U+2066-U+2069).
// msgctl's text output and the console both draw through these two functions.

const UNSAFE_LINE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
const UNSAFE_TEXT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

const visible = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * One line of text (a table cell, a header, a status line): tab, newline and carriage return
 * become a space, so a value never splits or shifts a row; every other control is escaped.
 */
export function safeLine(text: string | number | null | undefined): string {
  if (text === null || text === undefined) return '';
  return String(text).replace(UNSAFE_LINE, (c) => (c === '\n' || c === '\t' || c === '\r' ? ' ' : visible(c)));
}

/** Text of several lines (a command's whole output): newline and tab stay, the rest is escaped. */
export function safeText(text: string): string {
  return text.replace(UNSAFE_TEXT, visible);
}

/** Whether `text` holds anything a terminal would act on (tests and assertions). */
export function hasTerminalControls(text: string): boolean {
  return /[\u001b\u007f-\u009f\u202a-\u202e\u2066-\u2069]/.test(text);
}
