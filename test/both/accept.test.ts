import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { verifyLedger } from '../../src/core/ledger.js';
import type { MessageContent } from '../../src/core/message-content.js';
import type { MessageRow } from '../../src/core/messages.js';
import { quote } from '../../src/core/prices.js';
import { type AcceptDeps, accept, type CheckedSend, type Preflight } from '../../src/core/send.js';
import { acceptStatements, DebitGuardError } from '../../src/db/accept-statements.js';
import { sql } from '../../src/db/sql.js';
import { dispatchEnqueuer } from '../../src/jobs/dispatch.js';
import { JobQueue } from '../../src/queue/queue.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The send accept on both stores (src/core/accept.ts through the store's batcher): what an
// accepted send writes, that a refused one writes nothing, the credit limit, Idempotency-Keys,
// and the races: many sends on funds for a few, and one key sent many times at once.

const PARTNER = 'prt_a';
const SENDER = '+15550001111';

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  t.clock.now = 1_800_000_000_000;
  await insertPartner(t, { id: PARTNER, slug: 'acme' });
  await t.exec(
    `INSERT INTO gateways (id, kind, name, settings, secrets, status, created_at, updated_at)
     VALUES ('gw_1', 'sandbox', 'sandbox', '{}', '{}', 'active', 0, 0)`,
  );
});
afterEach(() => t.close());

/** Another accept path over the same store, with a batcher of its own (as a second process would have). */
function acceptDeps(over: Partial<AcceptDeps> = {}): AcceptDeps {
  return {
    ctx: t.ctx,
    enqueueDispatch: dispatchEnqueuer(new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store)),
    defaultLowBalance: null,
    idempotencyTtlMs: 86_400_000,
    ...over,
  };
}

/** The partner's balance (moved by an adjustment in the ledger, so balance and entries agree) and credit limit. */
async function setFunds(to: number, creditLimit = 0) {
  const delta = to - (await balance());
  await t.exec(`UPDATE partners SET balance = ${to}, credit_limit = ${creditLimit} WHERE id = '${PARTNER}'`);
  if (delta !== 0)
    await t.exec(
      `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, message_id, note, actor, created_at)
       VALUES ('${PARTNER}', 'adjustment', ${delta}, ${to}, NULL, 'test', 'operator:test', 0)`,
    );
}

interface SendOpts {
  price?: number;
  key?: string;
  hash?: string;
  channel?: 'sms' | 'whatsapp';
  content?: MessageContent;
  template?: Preflight['template'];
  lowBalanceThreshold?: number | null;
  deps?: AcceptDeps;
  render?: (m: MessageRow) => unknown;
}

let defaultDeps: AcceptDeps | undefined;

function send(to: string, o: SendOpts = {}) {
  const channel = o.channel ?? 'sms';
  const price = o.price ?? 10_000;
  const preflight: Preflight = {
    channel: { id: `ch_${channel}`, type: channel, gatewayId: 'gw_1', sender: SENDER, enforceWindow: false },
    partner: { lowBalanceThreshold: o.lowBalanceThreshold ?? null },
    unitPrice: price,
    template: o.template,
  };
  const checked: CheckedSend = {
    principal: { tokenId: 'tok_1', partnerId: PARTNER, partnerSlug: 'acme', scopes: ['*'], rateLimitPerMinute: null },
    preflight,
    to,
    content: o.content ?? { kind: 'text', text: 'hi' },
    quote: quote(price, channel, 'hi'),
  };
  defaultDeps ??= acceptDeps();
  return accept(o.deps ?? defaultDeps, checked, {
    idempotency: o.key ? { key: o.key, hash: o.hash ?? `h-${o.key}` } : undefined,
    render: o.render ?? ((m) => ({ id: m.id, status: m.status, price: m.price })),
  });
}
afterEach(() => {
  defaultDeps = undefined;
});

const DEBITS = "ledger_entries WHERE kind = 'debit'";
const one = async <R>(q: ReturnType<typeof sql>) => (await t.ctx.store.get<R>(q))!;
const balance = async () =>
  Number((await one<{ b: number }>(sql`SELECT balance AS b FROM partners WHERE id = ${PARTNER}`)).b);
const count = async (table: string) =>
  Number((await one<{ n: number }>(sql`SELECT COUNT(*) AS n FROM ${sql.raw(table)}`)).n);

/** Everything an accept writes, counted: a refused send must leave it as it was. */
async function footprint() {
  return {
    balance: await balance(),
    messages: await count('messages'),
    ledger: await count('ledger_entries'),
    jobs: await count('jobs'),
    events: await count('events'),
    contacts: await count('contacts'),
    conversations: await count('conversations'),
    keys: await count('idempotency_keys'),
  };
}

describe('the send accept', () => {
  it('writes the message, the debit and its ledger entry, the dispatch job, the contact and the conversation', async () => {
    await setFunds(100_000);
    const out = await send('+14155550101');
    expect(out.kind).toBe('accepted');
    const id = (out.answer as { id: string }).id;
    const m = await one<MessageRow>(sql`SELECT * FROM messages WHERE id = ${id}`);
    expect(m).toMatchObject({
      partner_id: PARTNER,
      direction: 'outbound',
      status: 'queued',
      price: 10_000,
      to: '+14155550101',
      from: SENDER,
      channel_id: 'ch_sms',
      gateway_id: 'gw_1',
      created_at: t.clock.now,
    });
    expect(await balance()).toBe(90_000);
    expect(
      await t.ctx.store.all(
        sql`SELECT kind, amount, balance_after, message_id, actor FROM ledger_entries WHERE kind = 'debit'`,
      ),
    ).toEqual([{ kind: 'debit', amount: -10_000, balance_after: 90_000, message_id: id, actor: 'token:tok_1' }]);
    const jobs = await t.ctx.store.all<{ kind: string; payload: string; state: string }>(
      sql`SELECT kind, payload, state FROM jobs`,
    );
    expect(jobs.map((j) => ({ ...j, payload: JSON.parse(j.payload) }))).toEqual([
      { kind: 'message.dispatch', payload: { message_id: id }, state: 'available' },
    ]);
    const contact = await one<{ id: string; phone: string }>(sql`SELECT id, phone FROM contacts`);
    expect(contact).toMatchObject({ id: m.contact_id, phone: '+14155550101' });
    expect(await one(sql`SELECT id, contact_id, channel_type, status, last_message_at FROM conversations`)).toEqual({
      id: m.conversation_id,
      contact_id: contact.id,
      channel_type: 'sms',
      status: 'open',
      last_message_at: t.clock.now,
    });

    // A second send to the recipient, later, in its contact's open conversation.
    t.clock.now += 5_000;
    const again = await send('+14155550101');
    const m2 = await one<MessageRow>(sql`SELECT * FROM messages WHERE id = ${(again.answer as { id: string }).id}`);
    expect([m2.contact_id, m2.conversation_id]).toEqual([m.contact_id, m.conversation_id]);
    expect(await count('contacts')).toBe(1);
    expect(await one(sql`SELECT last_message_at FROM conversations`)).toEqual({ last_message_at: t.clock.now });
    expect(await balance()).toBe(80_000);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });

  it('sends to one new recipient in one batch share one contact and one conversation', async () => {
    await setFunds(100_000);
    const outs = await Promise.all([send('+14155550101'), send('+14155550101'), send('+14155550101')]);
    expect(outs.map((o) => o.kind)).toEqual(['accepted', 'accepted', 'accepted']);
    expect([await count('contacts'), await count('conversations'), await count('messages')]).toEqual([1, 1, 3]);
    expect(await balance()).toBe(70_000);
  });

  it('writes partner.balance_low once, when a send takes the balance below the threshold', async () => {
    await setFunds(100_000);
    await send('+14155550101', { lowBalanceThreshold: 85_000 });
    expect(await count('events')).toBe(0);
    await send('+14155550102', { lowBalanceThreshold: 85_000 }); // 90,000 → 80,000: crosses
    await send('+14155550103', { lowBalanceThreshold: 85_000 });
    const events = await t.ctx.store.all<{ type: string; payload: string }>(sql`SELECT type, payload FROM events`);
    expect(events.map((e) => ({ type: e.type, ...JSON.parse(e.payload) }))).toEqual([
      expect.objectContaining({
        type: 'partner.balance_low',
        event: 'partner.balance_low',
        partner_id: PARTNER,
        balance: expect.objectContaining({ micro: 80_000 }),
      }),
    ]);
  });

  it('refuses with nothing written: funds short, funds exhausted, a suppressed recipient, a paused template', async () => {
    await setFunds(15_000);
    const before = await footprint();
    await expect(send('+14155550101', { price: 20_000 })).rejects.toMatchObject({
      code: 'insufficient_balance',
      message: expect.stringMatching(/it costs .+ is available/),
    });
    await t.exec(
      `INSERT INTO suppressions (id, partner_id, channel, address, scope, reason, group_id, source, detail, created_at)
       VALUES ('sup_1', '${PARTNER}', 'sms', '+14155550102', '', 'opt_out_keyword', '', 'pwh_1', NULL, 1)`,
    );
    await expect(send('+14155550102')).rejects.toMatchObject({ code: 'recipient_suppressed' });
    // A template the catalogue holds PAUSED since the send was checked.
    await t.exec(
      `INSERT INTO whatsapp_template_syncs (gateway_id, synced_at, templates, attempted_at, error) VALUES ('gw_1', 1, 1, 1, NULL);
       INSERT INTO whatsapp_templates (id, gateway_id, meta_id, name, language, status, category, parameter_format,
         components, spec, state_at, synced_at, updated_at)
       VALUES ('wt_1', 'gw_1', '1001', 'spring_sale', 'en_US', 'PAUSED', 'marketing', 'positional', '[]',
         '{"format":"positional","header":null,"body":[],"buttons":[]}', 1, 1, 1)`,
    );
    const template = { kind: 'template' as const, template: { name: 'spring_sale', language: 'en_US' } };
    await expect(
      send('+14155550103', {
        channel: 'whatsapp',
        content: template,
        template: { check: template.template, note: 'whatsapp template', category: 'MARKETING' },
      }),
    ).rejects.toMatchObject({ code: 'template_invalid', message: expect.stringMatching(/is PAUSED/) });
    expect(await footprint()).toEqual(before);
    // Exhausted funds refuse even a free message, and come before the suppression's 400.
    await setFunds(0);
    const exhausted = await footprint();
    await expect(send('+14155550104', { price: 0 })).rejects.toMatchObject({
      code: 'insufficient_balance',
      message: expect.stringMatching(/exhausted/),
    });
    await expect(send('+14155550102')).rejects.toMatchObject({ code: 'insufficient_balance' });
    expect(await footprint()).toEqual(exhausted);
    // The refusals in one batch with an accepted send: only that one is written.
    await setFunds(10_000);
    const mixed = await Promise.allSettled([
      send('+14155550102'),
      send('+14155550105'),
      send('+14155550106'), // the funds went to the send before it
    ]);
    expect(mixed.map((r) => (r.status === 'fulfilled' ? r.value.kind : r.reason.code))).toEqual([
      'recipient_suppressed',
      'accepted',
      'insufficient_balance',
    ]);
    expect([await balance(), await count('messages'), await count(DEBITS)]).toEqual([0, 1, 1]);
  });

  it('lets the balance go down to minus the credit limit, and no further', async () => {
    await setFunds(0, 50_000);
    await send('+14155550101', { price: 20_000 });
    await send('+14155550102', { price: 20_000 });
    await expect(send('+14155550103', { price: 20_000 })).rejects.toMatchObject({ code: 'insufficient_balance' });
    await send('+14155550104', { price: 10_000 }); // exactly to -50,000
    expect(await balance()).toBe(-50_000);
    await expect(send('+14155550105', { price: 0 })).rejects.toMatchObject({
      code: 'insufficient_balance',
      message: expect.stringMatching(/exhausted/),
    });
    expect(await count('messages')).toBe(3);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });

  it('replays an Idempotency-Key with its first answer, refuses it with another body, and forgets it after its lifetime', async () => {
    await setFunds(100_000);
    const first = await send('+14155550101', { key: 'k1' });
    expect(first.kind).toBe('accepted');
    const replay = await send('+14155550101', { key: 'k1' });
    expect(replay).toEqual({ kind: 'replay', outcome: 'accepted', answer: first.answer });
    await expect(send('+14155550199', { key: 'k1', hash: 'another body' })).rejects.toMatchObject({
      code: 'idempotency_key_reused',
    });
    expect([await balance(), await count('messages'), await count('idempotency_keys')]).toEqual([90_000, 1, 1]);
    // Replayed even when the money has run out since: the first request was the one that paid.
    await setFunds(0);
    expect((await send('+14155550101', { key: 'k1' })).kind).toBe('replay');
    // Past its lifetime the key is a new request.
    await setFunds(100_000);
    t.clock.now += 86_400_001;
    expect((await send('+14155550101', { key: 'k1' })).kind).toBe('accepted');
    expect([await count('messages'), await count('idempotency_keys')]).toEqual([2, 1]);
  });

  it('the same key twice in one batch: the first is accepted, the second replays it or conflicts', async () => {
    await setFunds(100_000);
    const [a, b, c] = await Promise.allSettled([
      send('+14155550101', { key: 'k2' }),
      send('+14155550101', { key: 'k2' }),
      send('+14155550101', { key: 'k2', hash: 'other' }),
    ]);
    expect(a.status === 'fulfilled' && a.value.kind).toBe('accepted');
    expect(b.status === 'fulfilled' && b.value).toEqual({
      kind: 'replay',
      outcome: 'accepted',
      answer: (a as PromiseFulfilledResult<{ answer: unknown }>).value.answer,
    });
    expect(c.status === 'rejected' && c.reason.code).toBe('idempotency_key_reused');
    expect([await balance(), await count('messages')]).toEqual([90_000, 1]);
  });

  it('a send whose answer cannot be built leaves nothing, and the others of its batch are written', async () => {
    await setFunds(100_000);
    const results = await Promise.allSettled([
      send('+14155550101'),
      send('+14155550102', {
        render: () => {
          throw new Error('cannot answer');
        },
      }),
      send('+14155550103'),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect([await balance(), await count('messages'), await count('jobs'), await count('contacts')]).toEqual([
      80_000, 2, 2, 2,
    ]);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  });
});

describe('the debit guard', () => {
  /** A plan as acceptBatch would write it for one message of `price`, the balance after it as given. */
  const plan = (price: number, balanceAfter: number) => ({
    now: t.clock.now,
    debits: [{ partnerId: PARTNER, amount: price, balanceAfter }],
    ledger: [
      { partnerId: PARTNER, amount: -price, balanceAfter, messageId: 'msg_guard', note: null, actor: 'token:tok_1' },
    ],
    contacts: [],
    conversations: [],
    touched: [],
    messages: [],
    idempotency: [],
  });

  it('rolls back a batch whose plan would overspend, or expects another balance than the debit leaves', async () => {
    await setFunds(10_000, 5_000);
    const before = await footprint();
    const write = (p: ReturnType<typeof plan>) =>
      t.ctx.store.transaction((tx) => acceptStatements(t.ctx.store).write(tx, p));
    // Past balance plus credit: the debit's own WHERE refuses it, whatever the plan says.
    await expect(write(plan(20_000, -10_000))).rejects.toBeInstanceOf(DebitGuardError);
    // Within the funds, but the plan counted on another balance than the row has.
    await expect(write(plan(5_000, 4_000))).rejects.toBeInstanceOf(DebitGuardError);
    expect(await footprint()).toEqual(before);
    // The plan as the rule makes it goes through.
    await write(plan(15_000, -5_000));
    expect(await balance()).toBe(-5_000);
  });
});

describe('the send accept under concurrency', () => {
  /** 1000 sends at once, half through a second accept batcher; the outcome of each. */
  async function race(price: number) {
    const second = acceptDeps();
    const results = await Promise.allSettled(
      Array.from({ length: 1000 }, (_, i) =>
        send(`+1415555${String(i).padStart(4, '0')}`, { price, deps: i % 2 === 0 ? undefined : second }),
      ),
    );
    const accepted = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    for (const r of refused) expect(r.reason.code).toBe('insufficient_balance');
    return accepted.length;
  }

  async function ledgerSum() {
    return Number(
      (
        await one<{ s: number }>(
          sql`SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) AS s FROM ledger_entries WHERE kind = 'debit'`,
        )
      ).s,
    );
  }

  it('1000 concurrent sends on funds for exactly 100: exactly 100 accepted, balance and ledger exact', async () => {
    await setFunds(500_000);
    expect(await race(5_000)).toBe(100);
    expect(await balance()).toBe(0);
    expect(await ledgerSum()).toBe(-500_000);
    expect([await count('messages'), await count(DEBITS), await count('jobs')]).toEqual([100, 100, 100]);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  }, 120_000);

  it('the same with a credit limit: the balance ends at exactly minus the limit', async () => {
    await setFunds(400_000, 100_000);
    expect(await race(5_000)).toBe(100);
    expect(await balance()).toBe(-100_000);
    expect(await ledgerSum()).toBe(-500_000);
    expect(await count('messages')).toBe(100);
    expect((await verifyLedger(t.ctx)).ok).toBe(true);
  }, 120_000);

  it('one Idempotency-Key sent 50 times at once: one message, one debit, every other answer the replay', async () => {
    await setFunds(100_000);
    const second = acceptDeps();
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => send('+14155550101', { key: 'race', deps: i % 2 ? second : undefined })),
    );
    const accepted = results.filter((r) => r.kind === 'accepted');
    expect(accepted).toHaveLength(1);
    for (const r of results.filter((x) => x.kind === 'replay')) expect(r.answer).toEqual(accepted[0].answer);
    expect([await balance(), await count('messages'), await count(DEBITS), await count('jobs')]).toEqual([
      90_000, 1, 1, 1,
    ]);
  }, 60_000);
});
