import { describe, expect, it } from 'vitest';
import { isGsm7, smsSegments } from '../../src/lib/segments.js';

const a = (n: number) => 'a'.repeat(n);
const euro = (n: number) => '€'.repeat(n);
const cyr = (n: number) => 'ж'.repeat(n); // UCS-2, one code unit

describe('GSM-7', () => {
  const table: [string, string, number, number][] = [
    ['empty', '', 0, 1],
    ['1 char', a(1), 1, 1],
    ['160 chars', a(160), 160, 1],
    ['161 chars', a(161), 161, 2],
    ['306 chars', a(306), 306, 2],
    ['307 chars', a(307), 307, 3],
    ['459 chars', a(459), 459, 3],
    ['460 chars', a(460), 460, 4],
  ];
  for (const [name, text, units, segments] of table) {
    it(`${name} -> ${segments}`, () => {
      expect(smsSegments(text)).toEqual({ encoding: 'GSM-7', units, segments });
    });
  }

  it('basic-table accents and symbols stay GSM-7', () => {
    expect(isGsm7('Ça coûte 5€? Oui! @home ÄÖÜäöü ñ è é ù ì ò £ ¥ § ¿ ¡')).toBe(false); // û is not GSM-7
    expect(isGsm7('Ça coute 5€? Oui! @home ÄÖÜäöü ñ è é ù ì ò £ ¥ § ¿ ¡')).toBe(true);
  });

  it('extension characters €[]{}^~|\\ count double', () => {
    for (const ch of '€[]{}^~|\\') expect(smsSegments(ch).units, ch).toBe(2);
    expect(smsSegments(euro(80))).toEqual({ encoding: 'GSM-7', units: 160, segments: 1 });
    expect(smsSegments(euro(81))).toEqual({ encoding: 'GSM-7', units: 162, segments: 2 });
    expect(smsSegments(a(159) + '€').segments).toBe(2); // 161 septets
    expect(smsSegments(a(158) + '{').segments).toBe(1); // 160 septets
  });

  it('a part boundary never splits an escape sequence', () => {
    // 152 + 2 = 154 > 153: the € moves whole to the second part. Counting septets alone
    // (ceil(306 / 153) = 2) would undercount what the carrier bills.
    const text = a(152) + '€' + a(152);
    expect(smsSegments(text).units).toBe(306);
    expect(smsSegments(text).segments).toBe(3);
    // 76 € fill 152 septets; the 77th cannot use the one left.
    expect(smsSegments(euro(153)).segments).toBe(3); // 306 septets: 76 + 76 + 1 escapes
    expect(smsSegments(euro(152)).segments).toBe(2);
  });
});

describe('UCS-2', () => {
  const table: [string, string, number][] = [
    ['70 chars', cyr(70), 1],
    ['71 chars', cyr(71), 2],
    ['134 chars', cyr(134), 2],
    ['135 chars', cyr(135), 3],
    ['201 chars', cyr(201), 3],
    ['202 chars', cyr(202), 4],
  ];
  for (const [name, text, segments] of table) {
    it(`${name} -> ${segments}`, () => {
      expect(smsSegments(text)).toMatchObject({ encoding: 'UCS-2', units: text.length, segments });
    });
  }

  it('one non-GSM character switches the whole message to UCS-2', () => {
    expect(smsSegments(a(69) + 'ж')).toMatchObject({ encoding: 'UCS-2', segments: 1 });
    expect(smsSegments(a(70) + 'ж')).toMatchObject({ encoding: 'UCS-2', segments: 2 });
  });

  it('emoji are surrogate pairs: two units each, never split across parts', () => {
    expect(smsSegments('😀')).toEqual({ encoding: 'UCS-2', units: 2, segments: 1 });
    expect(smsSegments('😀'.repeat(35)).segments).toBe(1); // 70 units
    expect(smsSegments('😀'.repeat(36)).segments).toBe(2); // 72 units
    // 33 emoji = 66 units per part: the 34th would need units 67 and 68.
    expect(smsSegments('😀'.repeat(66)).segments).toBe(2);
    expect(smsSegments('😀'.repeat(67)).segments).toBe(3);
    // 66 single units + an emoji: 68 > 67, so the pair starts part two.
    expect(smsSegments(cyr(66) + '😀' + cyr(66)).segments).toBe(3);
  });
});
