import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ChannelType } from '../../src/core/context.js';
import { verifyLedger } from '../../src/core/ledger.js';
import type { MessageContent } from '../../src/core/message-content.js';
import type { MessageRow } from '../../src/core/messages.js';
import { type AcceptDeps, checkSend, type SendPlan, sendCost, sendMessage } from '../../src/core/send.js';
import { sql } from '../../src/db/sql.js';
import { dispatchEnqueuer } from '../../src/jobs/dispatch.js';
import { idFloor } from '../../src/lib/id-time.js';
import { invalid } from '../../src/lib/errors.js';
import { JobQueue } from '../../src/queue/queue.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// sendMessage through its whole path on both stores: the checks before the accept (channel and
// gateway, funds exhausted, the payload, the suppression list, the 24-hour window, a WhatsApp
// template against its catalogue and its category's price) read through the store, then the
// accept writes the message, the debit and its dispatch job. A refused send writes nothing.

const PARTNER = 'prt_a';
const SMS_SENDER = '+15550001111';
const WA_SENDER = '+15550003333';
const TO = '+14155550101';
const NOW = 1_800_000_000_000;
const DAY = 24 * 3_600_000;

let t: StoreCtx;
let deps: AcceptDeps;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  t.clock.now = NOW;
  await insertPartner(t, { id: PARTNER, slug: 'acme' });
  await t.exec(
    `INSERT INTO gateways (id, kind, name, settings, secrets, status, created_at, updated_at) VALUES
       ('gw_sms', 'sandbox', 'sms', '{}', '{}', 'active', 0, 0),
       ('gw_wa', 'whatsapp_cloud', 'wa', '{"phone_number_id":"106540352240001"}', '{}', 'active', 0, 0);
     INSERT INTO channels (id, partner_id, gateway_id, type, sender, status, position, created_at, updated_at) VALUES
       ('ch_sms', '${PARTNER}', 'gw_sms', 'sms', '${SMS_SENDER}', 'active', 0, 0, 0),
       ('ch_wa', '${PARTNER}', 'gw_wa', 'whatsapp', '${WA_SENDER}', 'active', 0, 0, 0);
     INSERT INTO prices (id, channel_type, partner_id, gateway_id, category, amount, created_at, updated_at) VALUES
       ('pr_1', 'sms', '', '', '', 7500, 0, 0),
       ('pr_2', 'sms', '${PARTNER}', '', '', 5000, 0, 0),
       ('pr_3', 'whatsapp', '', '', '', 9000, 0, 0)`,
  );
  deps = {
    ctx: t.ctx,
    enqueueDispatch: dispatchEnqueuer(new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store)),
    defaultLowBalance: null,
    idempotencyTtlMs: DAY,
  };
});
afterEach(() => t.close());

const PRINCIPAL = {
  tokenId: 'tok_1',
  partnerId: PARTNER,
  partnerSlug: 'acme',
  scopes: ['*'],
  rateLimitPerMinute: null,
};

interface SendOpts {
  channel?: ChannelType | null;
  channels?: ChannelType[];
  to?: string;
  content?: MessageContent;
  /** The payload's 400, thrown by build. */
  badPayload?: boolean;
  key?: string;
  sendAt?: number;
}

function request(o: SendOpts = {}) {
  const channel = o.channel === undefined ? 'sms' : o.channel;
  return {
    principal: PRINCIPAL,
    channel,
    channels: o.channels ?? (channel ? [channel] : ['sms']),
    build: (): SendPlan => {
      if (o.badPayload) throw invalid('the body is not valid', [{ field: 'text', message: 'required' }]);
      const content = o.content ?? { kind: 'text', text: 'hello' };
      return {
        to: o.to ?? TO,
        content,
        priceText: content.kind === 'text' ? content.text : undefined,
        sendAt: o.sendAt,
      };
    },
    idempotency: o.key ? { key: o.key, hash: `h-${o.key}` } : undefined,
  };
}

function send(o: SendOpts = {}) {
  return sendMessage(deps, request(o), (m: MessageRow) => ({ id: m.id, price: m.price, status: m.status }));
}

const one = async <R>(q: ReturnType<typeof sql>) => (await t.ctx.store.get<R>(q))!;
const balance = async () =>
  Number((await one<{ b: number }>(sql`SELECT balance AS b FROM partners WHERE id = ${PARTNER}`)).b);
const count = async (table: string) =>
  Number((await one<{ n: number }>(sql`SELECT COUNT(*) AS n FROM ${sql.raw(table)}`)).n);

async function setFunds(to: number, creditLimit = 0) {
  const delta = to - (await balance());
  await t.exec(`UPDATE partners SET balance = ${to}, credit_limit = ${creditLimit} WHERE id = '${PARTNER}'`);
  if (delta !== 0)
    await t.exec(
      `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, note, actor, created_at)
       VALUES ('${PARTNER}', 'adjustment', ${delta}, ${to}, NULL, 'test', 'operator:test', 0)`,
    );
}

/** Everything a send writes, counted: a refused send must leave it as it was. */
async function footprint() {
  return {
    balance: await balance(),
    messages: await count('messages'),
    ledger: await count('ledger_entries'),
    jobs: await count('jobs'),
    contacts: await count('contacts'),
    conversations: await count('conversations'),
    keys: await count('idempotency_keys'),
  };
}

/** The customer wrote to `sender` on WhatsApp at `at`: its contact, conversation and inbound message. */
async function inbound(at: number, sender = WA_SENDER) {
  await t.exec(
    `INSERT INTO contacts (id, partner_id, name, phone, email, psid, created_at, updated_at)
       VALUES ('ct_1', '${PARTNER}', NULL, '${TO}', NULL, NULL, 0, 0);
     INSERT INTO conversations (id, partner_id, contact_id, channel_type, status, last_message_at, last_inbound_at, created_at, updated_at)
       VALUES ('cv_1', '${PARTNER}', 'ct_1', 'whatsapp', 'open', ${at}, ${at}, 0, ${at});
     INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, conversation_id, contact_id, "to", "from", content, status,
         provider_message_id, provider_id_indexed, error_code, dispatch_uncertain, price, segments, sent_at, created_at, updated_at)
       VALUES ('${idFloor('msg', at).slice(0, -1)}1', '${PARTNER}', 'inbound', 'whatsapp', 'ch_wa', 'cv_1', 'ct_1', '${sender}', '${TO}',
         '{"kind":"text","text":"hi"}', 'received', NULL, 0, NULL, 0, 0, 1, ${at}, ${at}, ${at})`,
  );
}

/** The gateway's catalogue, synced, with one template. */
async function catalogue(name: string, status: string, category: string) {
  await t.exec(
    `INSERT INTO whatsapp_template_syncs (gateway_id, synced_at, templates, attempted_at, error) VALUES ('gw_wa', 1, 1, 1, NULL);
     INSERT INTO whatsapp_templates (id, gateway_id, meta_id, name, language, status, category, parameter_format,
       components, spec, state_at, synced_at, updated_at)
     VALUES ('wt_1', 'gw_wa', '1001', '${name}', 'en_US', '${status}', '${category}', 'positional', '[]',
       '{"format":"positional","header":null,"body":[],"buttons":[]}', 1, 1, 1)`,
  );
}

const template = (name: string): MessageContent => ({ kind: 'template', template: { name, language: 'en_US' } });

describe('sendMessage', () => {
  it('accepts an SMS at the partner’s price: the message, its debit and ledger entry, the dispatch job', async () => {
    await setFunds(100_000);
    const out = await send();
    expect(out.kind).toBe('accepted');
    const id = (out.answer as { id: string }).id;
    expect(out.answer).toEqual({ id, price: 5000, status: 'queued' });
    expect(
      await one(sql`SELECT partner_id, channel_id, gateway_id, "to", "from", price, status FROM messages`),
    ).toEqual({
      partner_id: PARTNER,
      channel_id: 'ch_sms',
      gateway_id: 'gw_sms',
      to: TO,
      from: SMS_SENDER,
      price: 5000,
      status: 'queued',
    });
    expect(
      await t.ctx.store.all(sql`SELECT amount, balance_after, message_id FROM ledger_entries WHERE kind = 'debit'`),
    ).toEqual([{ amount: -5000, balance_after: 95_000, message_id: id }]);
    const jobs = await t.ctx.store.all<{ kind: string; payload: string }>(sql`SELECT kind, payload FROM jobs`);
    expect(jobs.map((j) => ({ kind: j.kind, payload: JSON.parse(j.payload) }))).toEqual([
      { kind: 'message.dispatch', payload: { message_id: id } },
    ]);
    expect(await balance()).toBe(95_000);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });

  it('sees a price changed by the operator on the next send (the settings-keyed cache)', async () => {
    await setFunds(100_000);
    expect((await send()).answer).toMatchObject({ price: 5000 });
    await t.exec(`UPDATE prices SET amount = 6000 WHERE id = 'pr_2'`);
    await new Promise((r) => setImmediate(r));
    expect((await send()).answer).toMatchObject({ price: 6000 });
    await t.exec(`DELETE FROM prices WHERE id = 'pr_2'`);
    await new Promise((r) => setImmediate(r));
    expect((await send()).answer).toMatchObject({ price: 7500 });
  });

  it('refuses 403 channel_not_assigned with nothing written: no channel, a disabled gateway', async () => {
    await setFunds(100_000);
    const before = await footprint();
    await expect(send({ channel: 'email' })).rejects.toMatchObject({
      code: 'channel_not_assigned',
      message: 'no email gateway is assigned to this partner; ask the operator to assign one',
    });
    await t.exec(`UPDATE gateways SET status = 'disabled' WHERE id = 'gw_sms'`);
    await new Promise((r) => setImmediate(r));
    await expect(send()).rejects.toMatchObject({
      code: 'channel_not_assigned',
      message: 'the sms gateway assigned to this partner is disabled',
    });
    // A request naming no channel: 403 unless one of the surface's channels is usable.
    await expect(send({ channel: null, channels: ['sms', 'email', 'messenger'] })).rejects.toMatchObject({
      code: 'channel_not_assigned',
      message: 'no active sms, email or messenger gateway is assigned to this partner; ask the operator to assign one',
    });
    expect(await footprint()).toEqual(before);
  });

  it('refuses 402 for exhausted funds before the payload’s 400, and the debit’s 402 for a short balance', async () => {
    await setFunds(0);
    const before = await footprint();
    for (const o of [{}, { badPayload: true }, { channel: null, channels: ['sms'] as ChannelType[] }]) {
      await expect(send(o)).rejects.toMatchObject({
        code: 'insufficient_balance',
        message: 'balance and credit limit are exhausted; top up to send',
      });
    }
    await setFunds(4000);
    const short = await footprint();
    await expect(send({ badPayload: true })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(send({ channel: null, channels: ['sms'] })).rejects.toMatchObject({
      code: 'invalid_request',
      message: 'the request names no channel',
    });
    await expect(send()).rejects.toMatchObject({
      code: 'insufficient_balance',
      message: expect.stringMatching(/it costs .+ is available/),
    });
    expect(await footprint()).toEqual(short);
    expect(before.messages).toBe(0);
  });

  it('refuses a WhatsApp free-form message outside the 24-hour window, and accepts it inside', async () => {
    await setFunds(100_000);
    const before = await footprint();
    const closed = {
      code: 'outside_customer_service_window',
      message: expect.stringContaining(`has not written to ${WA_SENDER} on whatsapp in the last 24 hours`),
    };
    await expect(send({ channel: 'whatsapp' })).rejects.toMatchObject(closed);
    // The customer wrote to another number of the partner: that window is not this sender's.
    await inbound(NOW - 3_600_000, '+15559999999');
    await expect(send({ channel: 'whatsapp' })).rejects.toMatchObject(closed);
    expect(await footprint()).toMatchObject({ ...before, contacts: 1, conversations: 1, messages: 1 });
    await t.exec(`DELETE FROM messages; DELETE FROM conversations; DELETE FROM contacts`);

    await inbound(NOW - DAY - 1);
    await expect(send({ channel: 'whatsapp' })).rejects.toMatchObject(closed);
    await t.exec(`DELETE FROM messages; DELETE FROM conversations; DELETE FROM contacts`);

    await inbound(NOW - 3_600_000);
    // Still open now, closed at a send_at past the 24 hours.
    await expect(send({ channel: 'whatsapp', sendAt: NOW + DAY })).rejects.toMatchObject({
      code: 'outside_customer_service_window',
      message: expect.stringContaining('will have closed at send_at'),
    });
    const out = await send({ channel: 'whatsapp' });
    expect(out.answer).toMatchObject({ price: 9000, status: 'queued' });
  });

  it('refuses a suppressed recipient first, before the window, with nothing written', async () => {
    await setFunds(100_000);
    await t.exec(
      `INSERT INTO suppressions (id, partner_id, channel, address, scope, reason, group_id, source, detail, created_at)
       VALUES ('sup_1', '${PARTNER}', 'whatsapp', '${TO}', '', 'opt_out_keyword', '', 'msg_stop', NULL, 1)`,
    );
    const before = await footprint();
    // Outside the window too: the suppression list comes first in the order.
    await expect(send({ channel: 'whatsapp' })).rejects.toMatchObject({ code: 'recipient_suppressed' });
    // The accept reads it for a send no earlier rule refused.
    await expect(send({ channel: 'whatsapp', content: template('spring_sale') })).rejects.toMatchObject({
      code: 'recipient_suppressed',
    });
    // A quote (checkSend) reads it itself.
    await expect(checkSend(t.ctx, request({ channel: 'whatsapp' }))).rejects.toMatchObject({
      code: 'recipient_suppressed',
    });
    expect(await footprint()).toEqual(before);
  });

  it('checks a template against the synced catalogue and prices it by its category', async () => {
    await setFunds(100_000);
    // Not synced: the catalogue is not checked, the WhatsApp price applies.
    expect((await send({ channel: 'whatsapp', content: template('anything') })).answer).toMatchObject({ price: 9000 });

    await catalogue('spring_sale', 'PAUSED', 'marketing');
    const before = await footprint();
    await expect(send({ channel: 'whatsapp', content: template('other') })).rejects.toMatchObject({
      code: 'template_invalid',
      message: expect.stringContaining('is not in the WhatsApp catalogue'),
    });
    await expect(send({ channel: 'whatsapp', content: template('spring_sale') })).rejects.toMatchObject({
      code: 'template_invalid',
      message: expect.stringContaining('is PAUSED'),
    });
    await expect(
      send({ channel: 'whatsapp', content: { kind: 'template', template: { name: 'spring_sale', language: 'de' } } }),
    ).rejects.toMatchObject({ code: 'template_invalid', message: expect.stringContaining('no translation') });
    expect(await footprint()).toEqual(before);

    // Approved: the category's price, the partner's own before the default.
    await t.exec(
      `UPDATE whatsapp_templates SET status = 'APPROVED';
       INSERT INTO prices (id, channel_type, partner_id, gateway_id, category, amount, created_at, updated_at) VALUES
         ('pr_m', 'whatsapp', '', '', 'marketing', 12000, 0, 0),
         ('pr_mp', 'whatsapp', '${PARTNER}', '', 'marketing', 11000, 0, 0)`,
    );
    const out = await send({ channel: 'whatsapp', content: template('spring_sale') });
    expect(out.answer).toMatchObject({ price: 11000 });
    const m = await one<{ content: string }>(
      sql`SELECT content FROM messages WHERE id = ${(out.answer as { id: string }).id}`,
    );
    expect(JSON.parse(m.content)).toMatchObject({ template: { name: 'spring_sale' } });
  });

  it('sends a utility template free inside the customer-service window', async () => {
    await setFunds(100_000);
    await catalogue('order_update', 'APPROVED', 'utility');
    expect((await send({ channel: 'whatsapp', content: template('order_update') })).answer).toMatchObject({
      price: 9000,
    });
    await t.exec(`DELETE FROM messages; DELETE FROM conversations; DELETE FROM contacts`);
    await inbound(NOW - 3_600_000);
    expect((await send({ channel: 'whatsapp', content: template('order_update') })).answer).toMatchObject({ price: 0 });
  });

  it('replays an Idempotency-Key before any refusal', async () => {
    await setFunds(100_000);
    const first = await send({ key: 'k1' });
    expect(first.kind).toBe('accepted');
    await setFunds(0);
    const again = await send({ key: 'k1' });
    expect(again).toMatchObject({ kind: 'replay', answer: first.answer });
    expect(await count('messages')).toBe(1);
  });

  it('quotes a send as the accept would price it, reading through the store', async () => {
    await setFunds(6000, 1000);
    const cost = await sendCost(t.ctx, PARTNER, 'sms', 'hello');
    expect(cost).toMatchObject({
      gateway: { id: 'gw_sms', name: 'sms' },
      sender: SMS_SENDER,
      quote: { unit: 5000, total: 5000 },
      currency: 'USD',
      available: 7000,
      exhausted: false,
      fundsRefusal: null,
    });
    expect((await sendCost(t.ctx, PARTNER, 'sms', 'x'.repeat(200))).fundsRefusal).toMatchObject({
      code: 'insufficient_balance',
    });
    expect(await sendCost(t.ctx, PARTNER, 'email')).toMatchObject({ gateway: null, sender: null });
  });
});
