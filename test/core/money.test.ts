import { describe, expect, it } from 'vitest';
import { MoneyParseError, formatMoney, moneyJson, parseMoney } from '../../src/lib/money.js';

describe('parseMoney', () => {
  const good: [string, number][] = [
    ['0.0075', 7_500],
    ['12.50', 12_500_000],
    ['12.5', 12_500_000],
    ['12', 12_000_000],
    ['100.00', 100_000_000],
    ['-5.00', -5_000_000],
    ['0', 0],
    ['-0', 0],
    ['-0.000001', -1],
    ['0.000001', 1],
    // The bound: one billion units either way.
    ['1000000000', 1_000_000_000_000_000],
    ['-1000000000.000000', -1_000_000_000_000_000],
    ['999999999.999999', 999_999_999_999_999],
    // The float trap: 0.1 + 0.2 style inputs stay exact.
    ['0.3', 300_000],
    ['1.005', 1_005_000],
  ];
  for (const [input, micro] of good) {
    it(`"${input}" -> ${micro}`, () => {
      expect(parseMoney(input)).toBe(micro);
      expect(Object.is(parseMoney(input), -0)).toBe(false);
    });
  }

  const bad: [string, RegExp][] = [
    // Only a plain decimal: no sign but minus, no padding, no leading zeros.
    ['+3', /expected a plain decimal number/],
    [' 5', /expected a plain decimal number/],
    ['5 ', /expected a plain decimal number/],
    [' 7.25 ', /expected a plain decimal number/],
    ['00005', /expected a plain decimal number/],
    ['007.10', /expected a plain decimal number/],
    ['-05', /expected a plain decimal number/],
    ['5\n', /expected a plain decimal number/],
    ['1.1234567', /at most 6 decimal places/],
    ['abc', /expected a plain decimal number/],
    ['', /expected a plain decimal number/],
    ['1.2.3', /expected a plain decimal number/],
    ['1e3', /expected a plain decimal number/],
    ['1,50', /expected a plain decimal number/],
    ['.5', /expected a plain decimal number/],
    ['5.', /expected a plain decimal number/],
    ['--5', /expected a plain decimal number/],
    ['0x10', /expected a plain decimal number/],
    ['Infinity', /expected a plain decimal number/],
    ['NaN', /expected a plain decimal number/],
    ['1 000', /expected a plain decimal number/],
    ['$5', /expected a plain decimal number/],
    ['1000000000.000001', /too large: at most 1000000000\.00 either way/],
    ['-1000000000.000001', /too large/],
    ['1000000001', /too large/],
    ['9007199254.740991', /too large/],
    ['9007199254.740992', /too large/],
    ['9007199255', /too large/],
    ['99999999999999999999', /too large/],
    ['-99999999999999999999.5', /too large/],
    ['1'.repeat(400), /too large/],
  ];
  for (const [input, reason] of bad) {
    it(`rejects ${JSON.stringify(input.length > 20 ? input.slice(0, 20) + '…' : input)}`, () => {
      expect(() => parseMoney(input)).toThrow(MoneyParseError);
      expect(() => parseMoney(input)).toThrow(reason);
    });
  }

  it('keeps short inputs whole in its message and cuts long ones to 40 characters and a length', () => {
    expect(() => parseMoney('1'.repeat(50))).toThrow(`invalid amount "${'1'.repeat(50)}"`);
    const long = 'x'.repeat(100_000);
    let message = '';
    try {
      parseMoney(long);
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toBe(
      `invalid amount "${'x'.repeat(40)}…" (100000 characters): expected a plain decimal number such as 12.50`,
    );
  });
});

describe('formatMoney', () => {
  const table: [number, string][] = [
    [0, '0.00'],
    [7_500, '0.0075'],
    [12_500_000, '12.50'],
    [100_000_000, '100.00'],
    [-5_000_000, '-5.00'],
    [-1, '-0.000001'],
    [1_234_567, '1.234567'],
    [1_000_000_000_000_000, '1000000000.00'],
    [-1_000_000_000_000_000, '-1000000000.00'],
  ];
  for (const [micro, text] of table) {
    it(`${micro} -> "${text}" and back`, () => {
      expect(formatMoney(micro)).toBe(text);
      expect(parseMoney(text)).toBe(micro);
    });
  }

  it('formats BigInt amounts exactly, also past 2^53', () => {
    expect(formatMoney(2n ** 53n + 1n)).toBe('9007199254.740993');
    expect(formatMoney(-(2n ** 63n))).toBe('-9223372036854.775808');
    expect(formatMoney(Number.MAX_SAFE_INTEGER)).toBe('9007199254.740991');
  });

  it('refuses non-integers', () => {
    expect(() => formatMoney(0.5)).toThrow(/not an integer/);
  });

  it('moneyJson carries both forms and the currency', () => {
    expect(moneyJson(7_500, 'USD')).toEqual({ micro: 7_500, amount: '0.0075', currency: 'USD' });
    expect(moneyJson(-5_000_000)).toEqual({ micro: -5_000_000, amount: '-5.00' });
  });
});
