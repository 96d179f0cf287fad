import pg from 'pg';

// Exact numbers from PostgreSQL. pg returns int8 (bigint: money in micro-units, counts, ids)
// and numeric (what sum(int8) returns) as text, because a JS number loses digits past 2^53.
// msgd's pools parse them to BigInt, exactly, with parsers of their own (never pg.types,
// which would change every pool in the process): int8 always, numeric when the text is an
// integer. A fractional numeric is refused rather than rounded; a query that wants one casts
// it to text.

const INT8 = 20;
const NUMERIC = 1700;
const INT8_ARRAY = 1016;
const NUMERIC_ARRAY = 1231;
const TEXT_ARRAY: number = 1009;

const INTEGER = /^-?\d+$/;

function parseNumeric(text: string): bigint {
  if (!INTEGER.test(text)) {
    throw new RangeError(
      `PostgreSQL returned the numeric ${text}, which is not an integer: cast it to text to read it`,
    );
  }
  return BigInt(text);
}

type Nested<T> = T | null | Nested<T>[];

function mapArray<T>(value: Nested<string>, fn: (s: string) => T): Nested<T> {
  if (Array.isArray(value)) return value.map((v) => mapArray(v, fn));
  return value === null ? null : fn(value);
}

const textArray = pg.types.getTypeParser(TEXT_ARRAY, 'text') as (s: string) => Nested<string>;

/** The `types` of a pool or client: pg's own parsers, except int8 and numeric (and their arrays) as BigInt. */
export const exactTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary'): (value: string) => unknown {
    if (format === 'binary') return pg.types.getTypeParser(oid, format) as (value: string) => unknown;
    switch (oid) {
      case INT8:
        return BigInt;
      case NUMERIC:
        return parseNumeric;
      case INT8_ARRAY:
        return (s) => mapArray(textArray(s), BigInt);
      case NUMERIC_ARRAY:
        return (s) => mapArray(textArray(s), parseNumeric);
      default:
        return pg.types.getTypeParser(oid, 'text') as (value: string) => unknown;
    }
  },
} as pg.CustomTypesConfig;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * A bigint from the database as a JS number, for money and counts that core keeps as numbers
 * (money is bounded by ±10^15 micro-units, well inside 2^53): throws rather than lose a digit.
 */
export function toSafeNumber(v: bigint): number {
  if (v > MAX_SAFE || v < -MAX_SAFE) {
    throw new RangeError(`${v} is outside ±(2^53 − 1): it cannot be a JS number without losing digits`);
  }
  return Number(v);
}
