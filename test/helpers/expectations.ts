import { expect } from 'vitest';
import type { CoreCtx } from '../../src/core/context.js';
import type { MessageRow } from '../../src/core/messages.js';
import { verifyLedger } from '../../src/core/ledger.js';
import { balanceOf, historyOf, jobsOf, ledgerOf, messagesOf } from './rows.js';

// What must hold after any send, dispatch or failure: the money rule and a message's end state.

/** The money rule after the fact: ledger consistent, every debit has its message and back. */
export async function expectMoneyConsistent(ctx: CoreCtx, partnerId: string) {
  const v = await verifyLedger(ctx);
  expect(v.mismatches).toEqual([]);
  expect(v.ok).toBe(true);
  const msgs = (await messagesOf(ctx, partnerId)).filter((m) => m.direction === 'outbound');
  const entries = await ledgerOf(ctx, partnerId);
  const debits = entries.filter((e) => e.kind === 'debit');
  const refunds = entries.filter((e) => e.kind === 'refund');
  // A debit for every outbound message (a free one debits 0), none without its message.
  expect([...new Set(debits.map((d) => d.message_id))].sort()).toEqual(msgs.map((m) => m.id).sort());
  for (const d of debits) expect(-d.amount).toBe(msgs.find((m) => m.id === d.message_id)!.price);
  for (const r of refunds) expect(r.amount).toBe(msgs.find((m) => m.id === r.message_id)!.price);
  // Per message: the debit at accept, then refunds and charges-again (proof it arrived after a
  // refund) strictly alternating, so it ends paid once, or refunded: never twice either way.
  for (const m of msgs) {
    const mine = entries.filter((e) => e.message_id === m.id);
    expect(
      mine.map((e) => e.kind),
      m.id,
    ).toEqual(mine.map((_, i) => (i % 2 === 0 ? 'debit' : 'refund')));
    expect(
      mine.reduce((cost, e) => cost - e.amount, 0),
      m.id,
    ).toBe(m.refunded === 1 ? 0 : m.price);
    if (m.price === 0) expect(mine, m.id).toHaveLength(1);
  }
}

/** A message the provider refused (or never took): failed, with its error, refunded once. */
export async function expectFailedAndRefunded(
  ctx: CoreCtx,
  partnerId: string,
  m: MessageRow,
  code: string | RegExp,
  startBalance: number,
) {
  expect(m.status).toBe('failed');
  if (typeof code === 'string') expect(m.error_code).toBe(code);
  else expect(m.error_code).toMatch(code);
  expect(m.error_message).toBeTruthy();
  expect(m.refunded).toBe(1);
  const entries = (await ledgerOf(ctx, partnerId)).filter((e) => e.message_id === m.id);
  expect(entries.map((e) => [e.kind, e.amount])).toEqual([
    ['debit', -m.price],
    ['refund', m.price],
  ]);
  expect(m.price).toBeGreaterThan(0);
  expect(await balanceOf(ctx, partnerId)).toBe(startBalance);
  expect((await historyOf(ctx, m.id)).at(-1)).toBe('failed');
  await expectMoneyConsistent(ctx, partnerId);
}

/**
 * A message the provider took: sent, its provider id stored, no error left over, no refund.
 * `uncertain`: an earlier attempt may also have reached the provider (timeout, reset).
 * `indexed`: whether the provider id is in messages_provider (its reports name it only by that id).
 */
export async function expectSent(
  ctx: CoreCtx,
  m: MessageRow,
  providerMessageId: string,
  opts: { uncertain?: boolean; indexed?: boolean } = {},
) {
  if (opts.indexed !== undefined) expect(m.provider_id_indexed, 'provider_id_indexed').toBe(opts.indexed ? 1 : 0);
  expect({
    status: m.status,
    provider: m.provider_message_id,
    error: m.error_code,
    errorMessage: m.error_message,
    refunded: m.refunded,
    uncertain: m.dispatch_uncertain,
  }).toEqual({
    status: 'sent',
    provider: providerMessageId,
    error: null,
    errorMessage: null,
    refunded: 0,
    uncertain: opts.uncertain ? 1 : 0,
  });
  expect(m.sent_at).toBeGreaterThan(0);
  expect(await historyOf(ctx, m.id)).toEqual(['queued', 'sent']);
  expect(await jobsOf(ctx, m.id)).toEqual([]);
}
