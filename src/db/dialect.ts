import { type Dialect, sql, type Sql } from './sql.js';

// The one place for what SQLite and PostgreSQL say differently. A query in core is written once
// with the sql`` tag, in the SQL both stores accept (ON CONFLICT … DO UPDATE, COALESCE,
// RETURNING, CASE, `IS DISTINCT FROM`, lower() …: see docs/architecture.md, "Queries"); where
// no common form exists, it splices in a fragment from here, chosen by the store's dialect:
//
//   sql`SELECT id FROM jobs ${indexedBy(ctx.store.dialect, 'jobs_claim')} WHERE …`
//
// Never an `if (postgres)` in core. Each function takes the Dialect and returns an Sql
// fragment; names and keys it splices in as text are checked here (they come from the code,
// never from input), values stay bound. Every function has a test running a real query on
// both stores (test/both/dialect.test.ts).
//
// Sections: add yours at the end, under a heading naming the part of msgd that needs it, with
// its test in test/both/dialect.test.ts.

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const COLUMN = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

function checked(what: string, text: string, re: RegExp): string {
  if (!re.test(text)) throw new Error(`${what} ${JSON.stringify(text)} is not a plain SQL name`);
  return text;
}

/** A column named in the code (`payload`, `jobs.payload`), or a fragment (an expression). */
export type ColumnRef = string | Sql;

function column(c: ColumnRef): Sql {
  return typeof c === 'string' ? sql.raw(checked('column', c, COLUMN)) : c;
}

// --- Common: index hints, JSON, LIKE ---------------------------------------------------------

/**
 * After a table (or its alias) in FROM/UPDATE: SQLite's `INDEXED BY <index>`, which makes it
 * use that index or fail the statement (where its planner would pick a worse one); nothing on
 * PostgreSQL, whose planner has no hints and chooses from statistics.
 */
export function indexedBy(dialect: Dialect, indexName: string): Sql {
  const name = checked('index', indexName, IDENTIFIER);
  return dialect === 'sqlite' ? sql.raw(`INDEXED BY ${name}`) : sql.raw('');
}

/**
 * The text of a JSON string field of a text column holding a JSON object: SQLite's
 * `json_extract(col, '$.key')`, PostgreSQL's `(col::jsonb ->> 'key')`. A string field reads as
 * the same text on both, a missing key or JSON null as NULL; a malformed document fails the
 * statement on both. Other JSON types differ (SQLite gives numbers as numbers, PostgreSQL as
 * text): read a number field as `CAST(${jsonText(…)} AS BIGINT)`.
 */
export function jsonText(dialect: Dialect, col: ColumnRef, key: string): Sql {
  const k = checked('JSON key', key, IDENTIFIER);
  return dialect === 'sqlite'
    ? sql`json_extract(${column(col)}, ${sql.raw(`'$.${k}'`)})`
    : sql`(${column(col)}::jsonb ->> ${sql.raw(`'${k}'`)})`;
}

/**
 * `col LIKE pattern`, ignoring the case of ASCII letters only, with `\` escaping `%`, `_` and
 * itself (escapeLike()), the same on both stores. SQLite's LIKE is already that. On PostgreSQL
 * LIKE is case-sensitive, and lower() of a bound pattern would fold non-ASCII letters too (by
 * the database's locale) where the "C" columns fold only ASCII: both sides are folded under
 * "C", which folds ASCII only, as SQLite.
 */
export function likeFold(dialect: Dialect, col: ColumnRef, pattern: string): Sql {
  return dialect === 'sqlite'
    ? sql`${column(col)} LIKE ${pattern} ESCAPE '\\'`
    : sql`lower(${column(col)} COLLATE "C") LIKE lower(${pattern}::text COLLATE "C") ESCAPE '\\'`;
}

/** `text` as a LIKE pattern matching it literally (with `ESCAPE '\'`, as likeFold() says). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

// --- Retention: redacted message content -----------------------------------------------------

/**
 * The redacted form of a text column holding a message's JSON content, as text:
 * `{"kind":"redacted","was":<its kind>,"redacted_at":<redactedAt>}` (src/core/retention.ts).
 * SQLite's json_object, PostgreSQL's json_build_object: the same JSON object on both (PostgreSQL
 * spaces it differently), with `was` NULL when the content has no string kind.
 */
export function redactedContent(dialect: Dialect, col: ColumnRef, redactedAt: string): Sql {
  const was = jsonText(dialect, col, 'kind');
  return dialect === 'sqlite'
    ? sql`json_object('kind', 'redacted', 'was', ${was}, 'redacted_at', ${redactedAt})`
    : sql`CAST(json_build_object('kind', 'redacted', 'was', ${was}, 'redacted_at', CAST(${redactedAt} AS TEXT)) AS TEXT)`;
}

// --- Read models: a list of values as one bound value ----------------------------------------

/**
 * `<column> IN (<values>)` with one bound value however many values there are, so the
 * statement's text (and SQLite's cached statement) stays the same: SQLite reads a JSON array
 * through json_each, PostgreSQL takes an array with `= ANY`. An empty list matches nothing.
 */
export function inList(dialect: Dialect, col: ColumnRef, values: readonly string[]): Sql {
  return dialect === 'sqlite'
    ? sql`${column(col)} IN (SELECT value FROM json_each(${JSON.stringify(values)}))`
    : sql`${column(col)} = ANY(${values}::text[])`;
}

// --- Contacts: the row read for a change ----------------------------------------------------

/**
 * After a SELECT of rows the transaction then changes from what it read (a read-modify-write,
 * such as merging a contact's attributes): PostgreSQL's `FOR UPDATE`, which holds other
 * transactions' changes and locking reads of those rows until this one ends, so none is lost;
 * nothing on SQLite, whose write transactions already run one at a time (BEGIN IMMEDIATE).
 */
export function forUpdate(dialect: Dialect): Sql {
  return dialect === 'postgres' ? sql.raw('FOR UPDATE') : sql.raw('');
}

// --- Outbound webhooks: work taken once, rows from lists -------------------------------------

/**
 * After a SELECT of work to take: PostgreSQL's `FOR UPDATE SKIP LOCKED`, so concurrent takers
 * get disjoint rows (a row another open transaction took is passed over, not waited for);
 * nothing on SQLite, whose write transactions run one at a time, each seeing the last's commit.
 */
export function skipLocked(dialect: Dialect): Sql {
  return dialect === 'sqlite' ? sql.raw('') : sql.raw('FOR UPDATE SKIP LOCKED');
}

/**
 * A list of rows of text values as a subquery with these columns, for `INSERT … SELECT … FROM
 * ${textRows(…)} AS r`: the whole list bound as one value on SQLite (a JSON array of arrays
 * read through json_each) and one array per column on PostgreSQL (`unnest`), so the statement's
 * text is the same whatever the number of rows. Rows come out in the list's order.
 */
export function textRows(dialect: Dialect, columns: readonly string[], rows: readonly (readonly string[])[]): Sql {
  const names = columns.map((c) => checked('column', c, IDENTIFIER));
  for (const r of rows) {
    if (r.length !== names.length) throw new Error(`a row has ${r.length} values for ${names.length} columns`);
  }
  if (dialect === 'sqlite') {
    const picks = names.map((c, i) => `json_extract(value, '$[${i}]') AS ${c}`).join(', ');
    return sql`(SELECT ${sql.raw(picks)} FROM json_each(${JSON.stringify(rows)}) ORDER BY key)`;
  }
  const arrays = names.map((_, i) => sql`${rows.map((r) => r[i])}::text[]`);
  const list = names.join(', ');
  return sql`(SELECT ${sql.raw(list)} FROM unnest(${sql.join(arrays)}) WITH ORDINALITY AS u(${sql.raw(list)}, row_no)
    ORDER BY row_no)`;
}

// --- Webhooks in: the received event of a message its customer unsent ------------------------

/**
 * A text column holding a message.received event's JSON payload, as text, with its `body`
 * emptied, its `media` an empty list and its `content` set to the JSON text `content`: SQLite's
 * json_set, PostgreSQL's jsonb_set. The same JSON object on both (PostgreSQL orders its keys as
 * jsonb does); a malformed payload or content fails the statement on both.
 */
export function unsentPayload(dialect: Dialect, col: ColumnRef, content: string): Sql {
  return dialect === 'sqlite'
    ? sql`json_set(${column(col)}, '$.body', '', '$.media', json('[]'), '$.content', json(${content}))`
    : sql`CAST(jsonb_set(jsonb_set(jsonb_set(${column(col)}::jsonb, '{body}', '""'), '{media}', '[]'), '{content}', CAST(${content} AS jsonb)) AS TEXT)`;
}

// --- Console: when the ledger's ids are settled -----------------------------------------------

/**
 * How long after its `created_at` a ledger row may still be uncommitted while rows with higher
 * ids are already visible, in ms; the spend rollup (core/spend.ts) reads past its id watermark
 * only up to the last row older than this. 0 on SQLite: one writer at a time draws ids and
 * commits in id order, so a visible row means every lower id is visible too (or rolled back).
 * One minute on PostgreSQL: a sequence hands out ids as transactions insert, not as they
 * commit, so with concurrent transactions (one msgd's send batches, or several msgd) a lower id
 * can become visible after a higher one. The margin is larger than any transaction writing the
 * ledger takes (an accept, a refund, a top-up: milliseconds; a debit whose transaction outlasts
 * it would be left out of the chart) plus the clock difference between the msgd hosts, whose
 * clocks write `created_at`.
 */
export function ledgerSettleMs(dialect: Dialect): number {
  return dialect === 'sqlite' ? 0 : 60_000;
}

// --- Instances: the database's clock ---------------------------------------------------------

/**
 * Now, in ms since the epoch, as an SQL value: on PostgreSQL the database server's clock
 * (`clock_timestamp()`), which every instance sharing it reads alike whatever their hosts'
 * clocks say; on SQLite, whose one process is the only writer, `now` (the caller's clock, bound).
 */
export function clockMs(dialect: Dialect, now: number): Sql {
  return dialect === 'sqlite'
    ? sql`${now}`
    : sql.raw('CAST(floor(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)');
}
