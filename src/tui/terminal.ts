// What the terminal can show. A locale without UTF-8 (LANG=C, LC_ALL=POSIX: a rescue shell, a
// minimal container, an old serial console) shows box-drawing and symbol glyphs as garbage,
// so there everything the console writes goes through an ASCII stand-in of the same width.

/** Whether the locale's character set is UTF-8: LC_ALL, else LC_CTYPE, else LANG, as setlocale reads them. */
export function utf8Locale(env: NodeJS.ProcessEnv): boolean {
  const locale = env.LC_ALL || env.LC_CTYPE || env.LANG || '';
  return /utf-?8/i.test(locale);
}

const STAND_IN: Record<string, string> = {
  '─': '-',
  '━': '-',
  '═': '=',
  '│': '|',
  '┃': '|',
  '║': '|',
  '●': '*',
  '○': 'o',
  '▲': '!',
  '…': '~',
  '·': '-',
  '›': '>',
  '‹': '<',
  '→': '>',
  '←': '<',
  '↑': '^',
  '↓': 'v',
  '✓': '+',
  '✗': 'x',
  '×': 'x',
  '•': '*',
  '▏': '|',
  '€': 'E',
  '£': 'L',
};

// Two columns wide (CJK, Hangul, fullwidth forms, emoji): two stand-ins keep the layout.
const WIDE =
  /[\u1100-\u115f\u2e80-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{1f300}-\u{1faff}\u{20000}-\u{3fffd}]/u;

/** Text with only ASCII: each other character replaced by a stand-in as wide as it was. */
export function toAscii(text: string): string {
  return text.replace(/[^\x00-\x7f]/gu, (c) => {
    const s = STAND_IN[c];
    if (s) return s;
    if (/^[\u2500-\u257f]$/.test(c)) return '+';
    if (/^\p{M}$/u.test(c)) return '';
    return WIDE.test(c) ? '??' : '?';
  });
}

/** The terminal's stream, writing only ASCII: for a locale without UTF-8. */
export function asciiStream(stdout: NodeJS.WriteStream): NodeJS.WriteStream {
  const write = (chunk: unknown, ...rest: unknown[]) =>
    (stdout.write as (...a: unknown[]) => boolean)(typeof chunk === 'string' ? toAscii(chunk) : chunk, ...rest);
  return new Proxy(stdout, {
    get(target, prop) {
      if (prop === 'write') return write;
      const v = Reflect.get(target, prop, target);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}
