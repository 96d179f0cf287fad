import { AppError } from '../lib/errors.js';

// Cursor pages: `{"data": [...], "next_cursor": "..." | null}`. A cursor is opaque to the
// partner: base64url of the last row's sort key and the order it belongs to. Pages are
// keyset reads (WHERE key < last ORDER BY key LIMIT n+1) on time-sortable ids, so rows
// inserted while a client pages never shift a page: no duplicates, no gaps.

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;

export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/** Keys are short: the order's tag, the id, and the time for time orders. */
export interface CursorKey {
  o: string;
  id: string;
  t?: number;
}

const ID = /^[a-z]{1,8}_[0-9a-z]{26}$/;

export function encodeCursor(key: CursorKey): string {
  return Buffer.from(JSON.stringify(key)).toString('base64url');
}

function bad(): AppError {
  return new AppError('invalid_request', 'the cursor is not valid for this list; start again without one', [
    { field: 'cursor', message: 'use next_cursor from the previous page of the same list and order' },
  ]);
}

/** The key a cursor carries, checked against the order it must belong to. */
export function decodeCursor(raw: string | undefined, order: string, opts: { time?: boolean } = {}): CursorKey | null {
  if (raw === undefined || raw === '') return null;
  let key: any;
  try {
    key = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!key || typeof key !== 'object' || key.o !== order || typeof key.id !== 'string' || !ID.test(key.id)) throw bad();
  if (opts.time ? !Number.isSafeInteger(key.t) : key.t !== undefined) throw bad();
  return { o: key.o, id: key.id, ...(key.t !== undefined ? { t: key.t } : {}) };
}

/**
 * Shape a page from rows read with LIMIT limit+1: the extra row only says another page
 * exists; the cursor is the key of the last row shown.
 */
export function page<R, J>(rows: R[], limit: number, toJson: (r: R) => J, keyOf: (r: R) => CursorKey): Page<J> {
  const more = rows.length > limit;
  const shown = more ? rows.slice(0, limit) : rows;
  return { data: shown.map(toJson), next_cursor: more ? encodeCursor(keyOf(shown[shown.length - 1])) : null };
}
