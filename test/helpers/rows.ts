import type { CoreCtx } from '../../src/core/context.js';
import { messageHistory, type MessageRow } from '../../src/core/messages.js';
import { waitFor } from './wait.js';

// Plain SQL views of the rows tests assert on (messages, ledger, jobs), read the way an
// operator would find them, never through the code under test's own caches.

export function message(ctx: CoreCtx, id: string): MessageRow {
  const m = ctx.db.sqlite.prepare('SELECT * FROM messages WHERE id = ?').get(id) as MessageRow | undefined;
  if (!m) throw new Error(`no message ${id}`);
  return m;
}

export function messagesOf(ctx: CoreCtx, partnerId: string): MessageRow[] {
  return ctx.db.sqlite
    .prepare('SELECT * FROM messages WHERE partner_id = ? ORDER BY id')
    .all(partnerId) as MessageRow[];
}

export interface LedgerRow {
  id: number;
  kind: string;
  amount: number;
  balance_after: number;
  message_id: string | null;
  note: string | null;
}

export function ledgerOf(ctx: CoreCtx, partnerId: string): LedgerRow[] {
  return ctx.db.sqlite
    .prepare(
      'SELECT id, kind, amount, balance_after, message_id, note FROM ledger_entries WHERE partner_id = ? ORDER BY id',
    )
    .all(partnerId) as LedgerRow[];
}

export function balanceOf(ctx: CoreCtx, partnerId: string): number {
  return (ctx.db.sqlite.prepare('SELECT balance FROM partners WHERE id = ?').get(partnerId) as { balance: number })
    .balance;
}

export interface JobRow {
  id: number;
  kind: string;
  state: string;
  attempts: number;
  max_attempts: number;
  reclaims: number;
  last_error: string | null;
}

/** Dispatch jobs still in the table for a message (completed ones are deleted). */
export function jobsOf(ctx: CoreCtx, messageId: string): JobRow[] {
  return ctx.db.sqlite
    .prepare(`SELECT * FROM jobs WHERE kind = 'message.dispatch' AND json_extract(payload, '$.message_id') = ?`)
    .all(messageId) as JobRow[];
}

/** The status history a partner and the operator see (GET /v1/messages/{id}, msgctl messages show). */
export function historyOf(ctx: CoreCtx, messageId: string): string[] {
  return messageHistory(ctx, messageId).map((r) => r.status);
}

export async function waitStatus(
  ctx: CoreCtx,
  id: string,
  status: string | string[],
  timeoutMs = 10_000,
): Promise<MessageRow> {
  const want = Array.isArray(status) ? status : [status];
  return waitFor(
    () => {
      const m = message(ctx, id);
      return want.includes(m.status) ? m : null;
    },
    `message ${id} to be ${want.join('|')}`,
    timeoutMs,
  );
}
