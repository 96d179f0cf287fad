import { describe, expect, it } from 'vitest';
import { KeySplitter, type KeyPress } from '../../src/tui/input.js';

// How the console reads what the terminal sends, event by event as Ink's reader cuts it
// (escape sequences apart from the text around them): every key on its own.

const on = (key: KeyPress) =>
  Object.entries(key)
    .filter(([, v]) => v === true)
    .map(([k]) => k)
    .join('+');

function keys(...events: string[]) {
  const s = new KeySplitter();
  return events.flatMap((e) => s.feed(e)).map(([input, key]) => [input, on(key)]);
}

describe('the key splitter', () => {
  it('splits text read at once into keys: letters, Tab, Enter, Backspace, Ctrl-C', () => {
    expect(keys('jjjjj')).toEqual(Array(5).fill(['j', '']));
    expect(keys('\tab\r')).toEqual([
      ['', 'tab'],
      ['a', ''],
      ['b', ''],
      ['', 'return'],
    ]);
    expect(keys('G\x7f\x03')).toEqual([
      ['G', 'shift'],
      ['', 'backspace'],
      ['c', 'ctrl'],
    ]);
  });

  it('reads escape sequences: arrows, Shift-Tab, Home/End, pages, Delete, Esc, Alt-x', () => {
    expect(keys('\x1b[A', '\x1bOB', '\x1b[C', '\x1b[D', '\x1b[Z')).toEqual([
      ['', 'upArrow'],
      ['', 'downArrow'],
      ['', 'rightArrow'],
      ['', 'leftArrow'],
      ['', 'shift+tab'],
    ]);
    expect(keys('\x1b[H', '\x1b[4~', '\x1b[5~', '\x1b[6~', '\x1b[3~', '\x1b', '\x1bx')).toEqual([
      ['', 'home'],
      ['', 'end'],
      ['', 'pageUp'],
      ['', 'pageDown'],
      ['', 'delete'],
      ['', 'escape+meta'],
      ['x', 'meta'],
    ]);
    expect(keys('\x1b[1;5A')).toEqual([['', 'upArrow+ctrl']]);
  });

  it('makes a bracketed paste one key of text, across reads and with controls inside', () => {
    expect(keys('\x1b[200~', 's3cr\tq', '\x1b[A', 'x\r', '\x1b[201~', 'j')).toEqual([
      ['s3cr\tq\x1b[Ax\r', 'paste'],
      ['j', ''],
    ]);
    // A paste that is never closed is handed over once it is too long to be typing.
    const big = 'a'.repeat((1 << 20) + 1);
    expect(keys('\x1b[200~', big).map(([t, k]) => [t.length, k])).toEqual([[big.length, 'paste']]);
  });
});
