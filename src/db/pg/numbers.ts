import pg from 'pg';

// Exact numbers from PostgreSQL, the same numbers as SQLite. pg returns int8 (bigint: money in
// micro-units, ms times, counts, ids, 0/1 flags) and numeric (what sum(int8) returns) as text,
// because a JS number loses digits past 2^53. msgd's pools parse them with parsers of their own
// (never pg.types, which would change every pool in the process):
// - int8 → a JS number, as better-sqlite3 gives an integer column, so core reads a row alike on
//   both stores. Every column msgd keeps is inside ±(2^53 − 1) (money is bounded by ±10^15
//   micro-units); a value past it fails the query with a RangeError rather than turn into a
//   float. `CAST(sum(x) AS BIGINT)` is therefore a number too, and fails past 2^53.
// - numeric → a BigInt, exactly, when its text is an integer: a sum that can pass 2^53 stays
//   bigint (SQLite gives a number there: `BigInt(v)` reads both). A fractional numeric is
//   refused rather than rounded; a query that wants one casts it to text.
// Their arrays alike.

const INT8 = 20;
const NUMERIC = 1700;
const INT8_ARRAY = 1016;
const NUMERIC_ARRAY = 1231;
const TEXT_ARRAY: number = 1009;

const INTEGER = /^-?\d+$/;

// 2^53 − 1 has 16 digits: text of 15 digits or fewer is always safe, and Number() reads it exactly.
const SHORT = 15;

/** An int8 as a JS number, exactly; a RangeError past ±(2^53 − 1). */
export function parseInt8(text: string): number {
  const digits = text.charCodeAt(0) === 45 /* - */ ? text.length - 1 : text.length;
  const n = Number(text);
  if (digits > SHORT && !Number.isSafeInteger(n)) {
    throw new RangeError(
      `PostgreSQL returned the bigint ${text}, outside ±(2^53 − 1): it cannot be a JS number without losing digits (a sum that can pass 2^53 is a numeric: leave it uncast to read it as a bigint)`,
    );
  }
  return n;
}

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

/**
 * The `types` of a pool or client: pg's own parsers, except int8 (a number, exact, or a
 * RangeError) and numeric (a bigint, integer only), and their arrays.
 */
export const exactTypes = {
  getTypeParser(oid: number, format?: 'text' | 'binary'): (value: string) => unknown {
    if (format === 'binary') return pg.types.getTypeParser(oid, format) as (value: string) => unknown;
    switch (oid) {
      case INT8:
        return parseInt8;
      case NUMERIC:
        return parseNumeric;
      case INT8_ARRAY:
        return (s) => mapArray(textArray(s), parseInt8);
      case NUMERIC_ARRAY:
        return (s) => mapArray(textArray(s), parseNumeric);
      default:
        return pg.types.getTypeParser(oid, 'text') as (value: string) => unknown;
    }
  },
} as pg.CustomTypesConfig;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * A bigint (a numeric sum) as a JS number, where the caller knows it is small: throws rather
 * than lose a digit.
 */
export function toSafeNumber(v: bigint): number {
  if (v > MAX_SAFE || v < -MAX_SAFE) {
    throw new RangeError(`${v} is outside ±(2^53 − 1): it cannot be a JS number without losing digits`);
  }
  return Number(v);
}
