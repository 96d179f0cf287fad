import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { CoreCtx } from '../../src/core/context.js';
import { messageHistory, type MessageRow } from '../../src/core/messages.js';
import { verifyLedger } from '../../src/core/ledger.js';
import { connect, postJson, setupPartner, type PartnerSetup } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import type { GraphFake } from '../fakes/graph.js';
import type { TwilioFake } from '../fakes/twilio.js';
import type { SendgridFake } from '../fakes/sendgrid.js';
import type { SmtpFake } from '../fakes/smtp.js';

// What the send-API and dispatch tests share: unique senders, gateways pointed at the fakes,
// and plain SQL views of the rows the tests assert on (messages, ledger, jobs).

let seq = 0;
const run = randomBytes(2).readUInt16BE(0) % 9000;

/** A sender address no other partner in this data dir has for the channel type. */
export function sender(type: string): string {
  seq += 1;
  const n = String(run * 1000 + seq).padStart(7, '0');
  switch (type) {
    case 'sms':
    case 'whatsapp':
      return `+1555${n}`;
    case 'email':
      return `sender${n}@example.com`;
    default:
      return `9${n}`;
  }
}

export const SMS = '/api/send-sms.php';
export const EMAIL = '/api/send-email.php';
export const WHATSAPP = '/api/send-whatsapp.php';

/** A partner with a sandbox gateway on the given channel types. */
export function sandboxPartner(
  ctx: CoreCtx,
  opts: Parameters<typeof setupPartner>[1] & { channels?: string[] } = {},
): PartnerSetup & { gateways: Record<string, string> } {
  const p = setupPartner(ctx, opts);
  const channels = opts.channels ?? ['sms', 'email', 'whatsapp', 'messenger', 'instagram'];
  const gateways: Record<string, string> = {};
  for (const type of channels) {
    // The delivery report is far away: these tests are about the send API, not the sandbox.
    const { gateway } = connect(
      ctx,
      p.partnerId,
      { kind: 'sandbox', settings: { delivery_delay_ms: 600_000 } },
      type,
      sender(type),
    );
    gateways[type] = gateway.id;
  }
  return { ...p, gateways };
}

export const send = (base: string, path: string, body: unknown, token?: string, headers: Record<string, string> = {}) =>
  postJson(base + path, body, token, headers);

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
    timeoutMs,
    `message ${id} to be ${want.join('|')}`,
  );
}

/** The money rule after the fact: ledger consistent, every debit has its message and back. */
export function expectMoneyConsistent(ctx: CoreCtx, partnerId: string) {
  const v = verifyLedger(ctx);
  expect(v.mismatches).toEqual([]);
  expect(v.ok).toBe(true);
  const msgs = messagesOf(ctx, partnerId).filter((m) => m.direction === 'outbound');
  const entries = ledgerOf(ctx, partnerId);
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

// Gateways pointed at the fakes. Rates are high unless a test is about shaping.

export const TWILIO_SID = `AC${'1a2b3c4d'.repeat(4)}`;
export const TWILIO_TOKEN = 'twilio_auth_token_1';
export const WA_PHONE_ID = '106540352242922';
export const WA_TOKEN = 'EAAG-whatsapp-token';
export const PAGE_ID = '682498302938465';
export const PAGE_TOKEN = 'EAAG-page-token';
export const IG_ID = '17841400000000001';
export const IG_TOKEN = 'IGQ-instagram-token';
export const SG_KEY = 'SG.test-key.abcdef';

export function twilioGateway(
  ctx: CoreCtx,
  partnerId: string,
  fake: TwilioFake,
  settings: Record<string, unknown> = {},
) {
  fake.addAccount(TWILIO_SID, TWILIO_TOKEN);
  const from = sender('sms');
  const r = connect(
    ctx,
    partnerId,
    {
      kind: 'twilio',
      settings: { base_url: fake.url, account_sid: TWILIO_SID, rate_per_second: 10_000, ...settings },
      secrets: { auth_token: TWILIO_TOKEN },
    },
    'sms',
    from,
  );
  return { ...r, from };
}

export function whatsappGateway(
  ctx: CoreCtx,
  partnerId: string,
  fake: GraphFake,
  settings: Record<string, unknown> = {},
) {
  fake.addAccount({ id: WA_PHONE_ID, kind: 'whatsapp', token: WA_TOKEN });
  const from = sender('whatsapp');
  const r = connect(
    ctx,
    partnerId,
    {
      kind: 'whatsapp_cloud',
      settings: {
        base_url: fake.url,
        api_version: 'v21.0',
        phone_number_id: WA_PHONE_ID,
        rate_per_second: 10_000,
        ...settings,
      },
      secrets: { access_token: WA_TOKEN },
    },
    'whatsapp',
    from,
  );
  return { ...r, from };
}

export function messengerGateway(ctx: CoreCtx, partnerId: string, fake: GraphFake) {
  fake.addAccount({ id: PAGE_ID, kind: 'page', token: PAGE_TOKEN });
  return connect(
    ctx,
    partnerId,
    {
      kind: 'meta_messenger',
      settings: { base_url: fake.url, page_id: PAGE_ID, rate_per_second: 10_000 },
      secrets: { page_access_token: PAGE_TOKEN },
    },
    'messenger',
  );
}

export function instagramGateway(ctx: CoreCtx, partnerId: string, fake: GraphFake) {
  fake.addAccount({ id: IG_ID, kind: 'instagram', token: IG_TOKEN });
  return connect(
    ctx,
    partnerId,
    {
      kind: 'meta_instagram',
      settings: { base_url: fake.url, ig_account_id: IG_ID, rate_per_second: 10_000 },
      secrets: { access_token: IG_TOKEN },
    },
    'instagram',
  );
}

export function sendgridGateway(ctx: CoreCtx, partnerId: string, fake: SendgridFake) {
  fake.apiKeys.add(SG_KEY);
  const from = sender('email');
  const r = connect(
    ctx,
    partnerId,
    { kind: 'sendgrid', settings: { base_url: fake.url, rate_per_second: 10_000 }, secrets: { api_key: SG_KEY } },
    'email',
    from,
  );
  return { ...r, from };
}

export function smtpGateway(ctx: CoreCtx, partnerId: string, fake: SmtpFake, auth?: { user: string; pass: string }) {
  const from = sender('email');
  const r = connect(
    ctx,
    partnerId,
    {
      kind: 'smtp',
      settings: {
        host: fake.host,
        port: fake.port,
        secure: false,
        rate_per_second: 10_000,
        ...(auth ? { user: auth.user } : {}),
      },
      secrets: auth ? { password: auth.pass } : {},
    },
    'email',
    from,
  );
  return { ...r, from };
}

/** Fast retries and a short provider timeout, so failure paths run in test time. */
export const FAST_DISPATCH = {
  'dispatch.timeoutMs': 300,
  'jobs.backoffBaseMs': 10,
  'jobs.backoffCapMs': 1000,
  'jobs.maxAttempts': 4,
};

/** A message the provider refused (or never took): failed, with its error, refunded once. */
export function expectFailedAndRefunded(
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
  const entries = ledgerOf(ctx, partnerId).filter((e) => e.message_id === m.id);
  expect(entries.map((e) => [e.kind, e.amount])).toEqual([
    ['debit', -m.price],
    ['refund', m.price],
  ]);
  expect(m.price).toBeGreaterThan(0);
  expect(balanceOf(ctx, partnerId)).toBe(startBalance);
  expect(historyOf(ctx, m.id).at(-1)).toBe('failed');
  expectMoneyConsistent(ctx, partnerId);
}

/**
 * A message the provider took: sent, its provider id stored, no error left over, no refund.
 * `uncertain`: an earlier attempt may also have reached the provider (timeout, reset).
 * `indexed`: whether the provider id is in messages_provider (its reports name it only by that id).
 */
export function expectSent(
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
  expect(historyOf(ctx, m.id)).toEqual(['queued', 'sent']);
  expect(jobsOf(ctx, m.id)).toEqual([]);
}
