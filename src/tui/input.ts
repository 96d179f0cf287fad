import type { Key } from 'ink';

// Keys as the terminal sends them: one read can hold several keys (`jjjjj` held down, Tab then
// text typed fast, a paste without bracketed paste), so every chunk is split into keys here,
// each handled in order. Ink's own reader already splits escape sequences from the text
// around them; a bracketed paste (ESC[200~ … ESC[201~) becomes one key carrying its text, so a
// pasted secret is inserted into the field as text, never read as keystrokes.

/** A key, with `paste` set for the text of one bracketed paste. */
export type KeyPress = Key & { paste?: boolean };

const PASTE_START = '\x1b[200~';
const PASTE_END = '\x1b[201~';
/** The most a paste holds before it is handed over unclosed (a secret is far shorter). */
const MAX_PASTE = 1 << 20;

export function blankKey(): KeyPress {
  return {
    upArrow: false,
    downArrow: false,
    leftArrow: false,
    rightArrow: false,
    pageDown: false,
    pageUp: false,
    home: false,
    end: false,
    return: false,
    escape: false,
    ctrl: false,
    shift: false,
    tab: false,
    backspace: false,
    delete: false,
    meta: false,
    super: false,
    hyper: false,
    capsLock: false,
    numLock: false,
  };
}

const CSI_KEYS: Record<string, Partial<KeyPress>> = {
  A: { upArrow: true },
  B: { downArrow: true },
  C: { rightArrow: true },
  D: { leftArrow: true },
  H: { home: true },
  F: { end: true },
  Z: { tab: true, shift: true },
  '1~': { home: true },
  '7~': { home: true },
  '4~': { end: true },
  '8~': { end: true },
  '3~': { delete: true },
  '5~': { pageUp: true },
  '6~': { pageDown: true },
};

/** One escape sequence (as Ink's reader cut it) as a key. */
function escapeKey(seq: string): [string, KeyPress] {
  const key = blankKey();
  if (seq === '\x1b') return ['', { ...key, escape: true, meta: true }];
  const csi = /^\x1b+[[O]([0-9;]*)([A-Za-z~])$/.exec(seq);
  if (csi) {
    const params = csi[1].split(';');
    const name = csi[2] === '~' ? `${params[0]}~` : csi[2];
    const mod = Number(params[1] ?? 1) - 1;
    const hit = CSI_KEYS[name];
    if (hit)
      return [
        '',
        { ...key, ...hit, shift: !!hit.shift || (mod & 1) === 1, meta: (mod & 2) === 2, ctrl: (mod & 4) === 4 },
      ];
    return ['', key];
  }
  // ESC then one character: Alt/Meta with that key.
  const rest = seq.replace(/^\x1b+/, '');
  return [rest, { ...key, meta: true }];
}

/** One character as a key: Enter, Tab, Backspace, Ctrl-letter, or text. */
function charKey(ch: string): [string, KeyPress] {
  const key = blankKey();
  if (ch === '\r' || ch === '\n') return ['', { ...key, return: true }];
  if (ch === '\t') return ['', { ...key, tab: true }];
  if (ch === '\x7f' || ch === '\b') return ['', { ...key, backspace: true }];
  const code = ch.codePointAt(0)!;
  if (code >= 1 && code <= 26) return [String.fromCharCode(code + 96), { ...key, ctrl: true }];
  if (code < 32) return ['', key];
  return [ch, { ...key, shift: /^[A-Z]$/.test(ch) }];
}

export class KeySplitter {
  private pasting: string | null = null;

  /** What one of Ink's input events holds: the keys, in order. */
  feed(event: string): [string, KeyPress][] {
    if (this.pasting !== null) {
      const end = event.indexOf(PASTE_END);
      if (end < 0) {
        this.pasting += event;
        // A terminal that never closes the paste: what came so far is the paste, no more is held.
        if (this.pasting.length <= MAX_PASTE) return [];
        const text = this.pasting;
        this.pasting = null;
        return [[text, { ...blankKey(), paste: true }]];
      }
      const text = this.pasting + event.slice(0, end);
      this.pasting = null;
      const after = event.slice(end + PASTE_END.length);
      return [[text, { ...blankKey(), paste: true }], ...(after ? this.feed(after) : [])];
    }
    if (event.startsWith(PASTE_START)) {
      this.pasting = '';
      const rest = event.slice(PASTE_START.length);
      return rest ? this.feed(rest) : [];
    }
    if (event.startsWith('\x1b')) return [escapeKey(event)];
    return [...event].map(charKey);
  }
}
