import type { CoreCtx } from '../../src/core/context.js';
import { messageHistoryIn, type MessageRow } from '../../src/core/messages.js';
import { jsonText } from '../../src/db/dialect.js';
import { type Sql, sql } from '../../src/db/sql.js';
import { waitFor } from './wait.js';

// Plain SQL views of the rows tests assert on (messages, ledger, jobs), read the way an
// operator would find them, never through the code under test's own caches. They read through
// ctx.store, so they work on either store.

export async function message(ctx: CoreCtx, id: string): Promise<MessageRow> {
  const m = await ctx.store.get<MessageRow>(sql`SELECT * FROM messages WHERE id = ${id}`);
  if (!m) throw new Error(`no message ${id}`);
  return m;
}

export function messagesOf(ctx: CoreCtx, partnerId: string): Promise<MessageRow[]> {
  return ctx.store.all<MessageRow>(sql`SELECT * FROM messages WHERE partner_id = ${partnerId} ORDER BY id`);
}

export interface LedgerRow {
  id: number;
  kind: string;
  amount: number;
  balance_after: number;
  message_id: string | null;
  note: string | null;
}

export function ledgerOf(ctx: CoreCtx, partnerId: string): Promise<LedgerRow[]> {
  return ctx.store.all<LedgerRow>(
    sql`SELECT id, kind, amount, balance_after, message_id, note FROM ledger_entries WHERE partner_id = ${partnerId} ORDER BY id`,
  );
}

export async function balanceOf(ctx: CoreCtx, partnerId: string): Promise<number> {
  const r = await ctx.store.get<{ balance: number }>(sql`SELECT balance FROM partners WHERE id = ${partnerId}`);
  if (!r) throw new Error(`no partner ${partnerId}`);
  return r.balance;
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
export function jobsOf(ctx: CoreCtx, messageId: string): Promise<JobRow[]> {
  return ctx.store.all<JobRow>(
    sql`SELECT * FROM jobs WHERE kind = 'message.dispatch' AND ${jsonText(ctx.store.dialect, 'payload', 'message_id')} = ${messageId}`,
  );
}

/** The status history a partner and the operator see (GET /v1/messages/{id}, msgctl messages show). */
export async function historyOf(ctx: CoreCtx, messageId: string): Promise<string[]> {
  return (await messageHistoryIn(ctx.store, messageId)).map((r) => r.status);
}

export async function waitStatus(
  ctx: CoreCtx,
  id: string,
  status: string | string[],
  timeoutMs = 10_000,
): Promise<MessageRow> {
  const want = Array.isArray(status) ? status : [status];
  return waitFor(
    async () => {
      const m = await message(ctx, id);
      return want.includes(m.status) ? m : null;
    },
    `message ${id} to be ${want.join('|')}`,
    timeoutMs,
  );
}

/**
 * A query written with `?` placeholders, as sql`` would take it: its values kept apart from its
 * text, for either store. The text must have no literal `?` of its own.
 */
export function sqlOf(text: string, ...values: unknown[]): Sql {
  const parts = text.split('?');
  if (parts.length !== values.length + 1)
    throw new Error(`${values.length} value(s) for ${parts.length - 1} placeholder(s): ${text}`);
  return sql(Object.assign(parts, { raw: parts }) as unknown as TemplateStringsArray, ...values);
}

/** The first row of a `?` query through ctx.store, or undefined. */
export function sqlRow<R = any>(ctx: CoreCtx, text: string, ...values: unknown[]): Promise<R | undefined> {
  return ctx.store.get<R>(sqlOf(text, ...values));
}

/** Every row of a `?` query through ctx.store. */
export function sqlRows<R = any>(ctx: CoreCtx, text: string, ...values: unknown[]): Promise<R[]> {
  return ctx.store.all<R>(sqlOf(text, ...values));
}

/** A `?` statement through ctx.store. */
export function sqlRun(ctx: CoreCtx, text: string, ...values: unknown[]): Promise<{ changes: number }> {
  return ctx.store.run(sqlOf(text, ...values));
}
