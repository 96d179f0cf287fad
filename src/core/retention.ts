import type { Row } from '../db/rows.js';
import type { messages } from '../db/schema.js';
import { jsonText, likeFold, redactedContent as redactedContentSql } from '../db/dialect.js';
import type { Queryable, Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
import { idFloor } from '../lib/id-time.js';
import type { CoreCtx } from './context.js';

// Message content is personal data: after retention.messageContentDays it is replaced by a
// marker (`{"kind":"redacted","was":"text","redacted_at":…}`), while the message row (who,
// when, channel, status, price), its status history and its ledger entries stay.
//
// The work walks messages in id order (ids begin with their creation time, src/lib/ids.ts)
// from a watermark kept in `meta`, a few hundred rows per transaction, giving the event loop
// back between them, so a first run over years of messages never holds up a send. A message
// still queued or sending needs its content for the provider call: it is remembered and
// redacted on a later run, once it has settled.

/** What messages.content holds once redacted (shown as `content` in /v1). */
interface RedactedContent {
  kind: 'redacted';
  /** The kind it had: text, template, email, media, ... */
  was: string | null;
  redacted_at: string;
}

/**
 * SQL for the redacted form of a row's `content` (one parameter: the ISO time of redaction), for
 * an UPDATE of messages. Retention and a customer's unsend (src/core/message-status.ts) write the same shape.
 */
export const REDACTED_CONTENT_SQL = `json_object('kind', 'redacted', 'was', json_extract(content, '$.kind'), 'redacted_at', ?)`;

/** The redacted form of a content of kind `was`, redacted at `at` (ms). */
export function redactedContent(was: string | null, at: number): RedactedContent {
  return { kind: 'redacted', was, redacted_at: new Date(at).toISOString() };
}

const UPTO = 'retention.content_upto';
const HELD = 'retention.content_held';
/** Unsettled messages remembered across runs; past this the watermark waits for them. */
const MAX_HELD = 10_000;
const UNSETTLED = new Set(['scheduled', 'queued', 'sending']);

export interface RedactOptions {
  /** Rows per transaction. */
  batch?: number;
  /** Between transactions: give the event loop back (msgd) or nothing (tests, msgctl). */
  pause?: () => Promise<void>;
}

export interface RedactSummary {
  redacted: number;
  /** Older than the cutoff but not settled yet: redacted on a later run. */
  held: number;
}

const immediate = () => new Promise<void>((r) => setImmediate(r));

export async function redactOldContent(ctx: CoreCtx, days: number, opts: RedactOptions = {}): Promise<RedactSummary> {
  const { store } = ctx;
  const batch = opts.batch ?? 500;
  const pause = opts.pause ?? immediate;
  const now = ctx.now();
  const bound = idFloor('msg', now - days * 86_400_000);
  const redacted_ = redactedContentSql(store.dialect, 'content', new Date(now).toISOString());
  const notRedacted = sql`${jsonText(store.dialect, 'content', 'kind')} IS DISTINCT FROM 'redacted'`;
  const getMeta = async (key: string) =>
    (await store.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = ${key}`))?.value;
  const setMeta = (q: Queryable, key: string, value: string) =>
    q.run(
      sql`INSERT INTO meta (key, value) VALUES (${key}, ${value}) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    );
  const redact = async (tx: Tx, id: string) =>
    (await tx.run(sql`UPDATE messages SET content = ${redacted_} WHERE id = ${id} AND ${notRedacted}`)).changes;

  let held: string[] = JSON.parse((await getMeta(HELD)) ?? '[]');
  let upto = (await getMeta(UPTO)) ?? 'msg_';
  let redacted = 0;

  // Messages passed over earlier because they had not settled.
  const still: string[] = [];
  for (let i = 0; i < held.length; i += batch) {
    const slice = held.slice(i, i + batch);
    redacted += await store.transaction(async (tx) => {
      let n = 0;
      for (const id of slice) {
        const row = await tx.get<Pick<Row<typeof messages>, 'status'>>(
          sql`SELECT status FROM messages WHERE id = ${id}`,
        );
        if (row === undefined) continue;
        if (UNSETTLED.has(row.status)) still.push(id);
        else n += await redact(tx, id);
      }
      return n;
    });
    await pause();
  }
  held = still;
  await setMeta(store, HELD, JSON.stringify(held));

  while (held.length < MAX_HELD) {
    const rows = await store.all<Pick<Row<typeof messages>, 'id' | 'status'>>(
      sql`SELECT id, status FROM messages WHERE id > ${upto} AND id < ${bound} ORDER BY id LIMIT ${batch}`,
    );
    if (rows.length === 0) break;
    const next = [...held];
    redacted += await store.transaction(async (tx) => {
      let n = 0;
      for (const r of rows) {
        if (UNSETTLED.has(r.status)) next.push(r.id);
        else n += await redact(tx, r.id);
      }
      await setMeta(tx, UPTO, rows[rows.length - 1].id);
      await setMeta(tx, HELD, JSON.stringify(next));
      return n;
    });
    // Committed: the watermark and the held list move on together.
    upto = rows[rows.length - 1].id;
    held = next;
    if (rows.length < batch) break;
    await pause();
  }
  return { redacted, held: held.length };
}

/**
 * Audit entries of logins, failed logins and logouts (the web console's, msgctl's and the
 * TUI's) older than `days`. Everything else in the audit log (money, configuration, tokens,
 * gateways) is kept for good. An action counts as one when its name says login or logout.
 */
export async function pruneLoginAudit(ctx: CoreCtx, days: number, opts: RedactOptions = {}): Promise<number> {
  const { store } = ctx;
  const cutoff = ctx.now() - days * 86_400_000;
  const batch = opts.batch ?? 5000;
  const pause = opts.pause ?? immediate;
  const login = sql`(${likeFold(store.dialect, 'action', '%login%')} OR ${likeFold(store.dialect, 'action', '%logout%')})`;
  let total = 0;
  for (;;) {
    const { changes: n } = await store.run(
      sql`DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE created_at < ${cutoff} AND ${login}
            ORDER BY id LIMIT ${batch})`,
    );
    total += n;
    if (n < batch) return total;
    await pause();
  }
}
