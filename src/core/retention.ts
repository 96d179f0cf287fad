import type { Row } from '../db/rows.js';
import type { messages } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
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
  const sqlite = ctx.db.sqlite;
  const batch = opts.batch ?? 500;
  const pause = opts.pause ?? immediate;
  const now = ctx.now();
  const bound = idFloor('msg', now - days * 86_400_000);
  const marker = new Date(now).toISOString();
  const getMeta = (key: string) =>
    stmt<[string], { value: string }>(sqlite, `SELECT value FROM meta WHERE key = ?`).get(key)?.value;
  const setMeta = stmt<[string, string]>(
    sqlite,
    `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
  );
  const page = stmt<[string, string, number], Pick<Row<typeof messages>, 'id' | 'status'>>(
    sqlite,
    `SELECT id, status FROM messages WHERE id > ? AND id < ? ORDER BY id LIMIT ?`,
  );
  const one = (id: string) =>
    stmt<[string], Pick<Row<typeof messages>, 'status'>>(sqlite, `SELECT status FROM messages WHERE id = ?`).get(id)
      ?.status;
  const redact = stmt<[string, string]>(
    sqlite,
    `UPDATE messages SET content = ${REDACTED_CONTENT_SQL}
      WHERE id = ? AND json_extract(content, '$.kind') IS NOT 'redacted'`,
  );

  let held: string[] = JSON.parse(getMeta(HELD) ?? '[]');
  let upto = getMeta(UPTO) ?? 'msg_';
  let redacted = 0;

  // Messages passed over earlier because they had not settled.
  const still: string[] = [];
  for (let i = 0; i < held.length; i += batch) {
    const slice = held.slice(i, i + batch);
    sqlite.transaction(() => {
      for (const id of slice) {
        const status = one(id);
        if (status === undefined) continue;
        if (UNSETTLED.has(status)) still.push(id);
        else redacted += redact.run(marker, id).changes;
      }
    })();
    await pause();
  }
  held = still;
  setMeta.run(HELD, JSON.stringify(held));

  while (held.length < MAX_HELD) {
    const rows = page.all(upto, bound, batch);
    if (rows.length === 0) break;
    sqlite.transaction(() => {
      for (const r of rows) {
        if (UNSETTLED.has(r.status)) held.push(r.id);
        else redacted += redact.run(marker, r.id).changes;
      }
      upto = rows[rows.length - 1].id;
      setMeta.run(UPTO, upto);
      setMeta.run(HELD, JSON.stringify(held));
    })();
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
  const cutoff = ctx.now() - days * 86_400_000;
  const batch = opts.batch ?? 5000;
  const pause = opts.pause ?? immediate;
  const del = stmt<[number, number]>(
    ctx.db.sqlite,
    `DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE created_at < ?
       AND (action LIKE '%login%' OR action LIKE '%logout%') LIMIT ?)`,
  );
  let total = 0;
  for (;;) {
    const n = del.run(cutoff, batch).changes;
    total += n;
    if (n < batch) return total;
    await pause();
  }
}
