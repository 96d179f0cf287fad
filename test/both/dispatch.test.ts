import pino from 'pino';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { addFallback } from '../../src/core/channels.js';
import { addGateway } from '../../src/core/gateways.js';
import { sql } from '../../src/db/sql.js';
import { CircuitBreakers } from '../../src/jobs/circuit-breaker.js';
import { DISPATCH_JOB, registerDispatch } from '../../src/jobs/dispatch.js';
import { GatewayBook } from '../../src/jobs/gateway-book.js';
import { JobQueue } from '../../src/queue/queue.js';
import { RateShaper } from '../../src/queue/rate.js';
import { Worker } from '../../src/queue/worker.js';
import { startTwilioFake, type TwilioFake, TWILIO_ERRORS } from '../fakes/twilio.js';
import { sender, TWILIO_SID, TWILIO_TOKEN, twilioGateway } from '../helpers/gateways.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { partner } from './read-fixtures.js';

// Dispatch on both stores, at the level of its job handler: a worker over the store runs
// message.dispatch against a fake Twilio on 127.0.0.1 that answers as Twilio does. What the
// partner sees: the status, the provider's id, the event, the money back once on a failure,
// a retry on the same gateway after a timeout, the move to the fallback when the primary
// certainly did not take it, and a scheduled message released (or refused) at its time.

const PARTNER = 'prt_a';
const TO = '+14155550123';
const PRICE = 7_500;
/** The partner's balance after its messages were debited at acceptance. */
const FUNDS = 50_000;

let primary: TwilioFake;
let backup: TwilioFake;
beforeAll(async () => {
  primary = await startTwilioFake();
  backup = await startTwilioFake();
});
afterAll(async () => {
  await primary.close();
  await backup.close();
});

let t: StoreCtx;
let queue: JobQueue;
let worker: Worker;
let dispatcher: Agent;
let gatewayId: string;
let channelId: string;
let from: string;
beforeEach(async () => {
  primary.reset();
  backup.reset();
  await primary.up();
  t = await openStoreCtx();
  await partner(t, PARTNER);
  await t.exec(`UPDATE partners SET balance = ${FUNDS} WHERE id = '${PARTNER}'`);
  const gw = await twilioGateway(t.ctx, PARTNER, primary);
  gatewayId = gw.gateway.id;
  channelId = gw.channel.id;
  from = gw.from;
  queue = new JobQueue(t.dialect === 'sqlite' ? t.ctx.db : t.ctx.store, { maxAttempts: 3 });
  worker = new Worker({ queue, concurrency: 4, leaseMs: 30_000, backoff: { baseMs: 10, capMs: 20, jitter: 'none' } });
  dispatcher = new Agent({ connections: 4, connectTimeout: 1_000 });
  const config = { ...t.ctx.config, dispatch: { ...t.ctx.config.dispatch, timeoutMs: 300 } };
  registerDispatch(worker, {
    ctx: t.ctx,
    config,
    dispatcher,
    shaper: new RateShaper(),
    gateways: new GatewayBook(t.ctx),
    logger: pino({ level: 'silent' }),
    breakers: new CircuitBreakers(config.dispatch.circuitBreaker, Date.now),
    callbackBase: () => null,
  });
});
afterEach(async () => {
  await worker.stop({ timeoutMs: 2_000 });
  await dispatcher.destroy();
  await t.close();
});

let seq = 0;
/** A message accepted (and debited) for the primary route, its dispatch job due at `runAt`. */
async function accepted(opts: { status?: 'queued' | 'scheduled'; runAt?: number } = {}): Promise<string> {
  seq += 1;
  const id = `msg_${String(seq).padStart(6, '0')}`;
  const now = Date.now();
  await t.exec(
    `INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content, status,
       price, segments, created_at, updated_at)
     VALUES ('${id}', '${PARTNER}', 'outbound', 'sms', '${channelId}', '${gatewayId}', '${TO}', '${from}',
       '{"kind":"text","text":"hello ${seq}"}', '${opts.status ?? 'queued'}', ${PRICE}, 1, ${now}, ${now})`,
  );
  await t.ctx.store.transaction((tx) =>
    queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: id }, runAt: opts.runAt }),
  );
  return id;
}

interface State {
  status: string;
  gateway_id: string | null;
  provider_message_id: string | null;
  error_code: string | null;
  refunded: number;
  dispatch_uncertain: number;
}
const state = async (id: string) =>
  (await t.ctx.store.get<State>(
    sql`SELECT status, gateway_id, provider_message_id, error_code, refunded, dispatch_uncertain FROM messages WHERE id = ${id}`,
  ))!;
const balance = async () =>
  (await t.ctx.store.get<{ balance: number }>(sql`SELECT balance FROM partners WHERE id = ${PARTNER}`))!.balance;
const refunds = async (id: string) =>
  (
    await t.ctx.store.all<{ amount: number }>(
      sql`SELECT amount FROM ledger_entries WHERE message_id = ${id} AND kind = 'refund' ORDER BY id`,
    )
  ).map((r) => r.amount);
const events = async (id: string) =>
  (
    await t.ctx.store.all<{ type: string; payload: string }>(
      sql`SELECT type, payload FROM events WHERE partner_id = ${PARTNER} ORDER BY created_at, id`,
    )
  )
    .map((e) => ({ type: e.type, data: JSON.parse(e.payload) }))
    .filter((e) => (e.data.data ?? e.data).message_id === id)
    .map((e) => ({ type: e.type, ...(e.data.data ?? e.data) }));
const twilioSids = (fake: TwilioFake) =>
  fake.requests.filter((r) => r.reply?.status === 201).map((r) => JSON.parse(r.reply!.body).sid as string);

async function run() {
  worker.start();
  await worker.drain({ untilEmpty: true, maxWaitMs: 10_000 });
}

describe(`dispatch on ${process.env.MSGD_TEST_STORE ?? 'sqlite'}`, () => {
  it('sends a queued message: sent, with the provider id, and message.sent', async () => {
    const id = await accepted();
    await run();
    const sids = twilioSids(primary);
    expect(sids).toHaveLength(1);
    expect(primary.requests[0]!.body).toMatchObject({ To: TO, From: from, Body: `hello ${seq}` });
    expect(await state(id)).toMatchObject({
      status: 'sent',
      provider_message_id: sids[0],
      error_code: null,
      refunded: 0,
      dispatch_uncertain: 0,
    });
    expect(await events(id)).toEqual([expect.objectContaining({ type: 'message.sent', status: 'sent' })]);
    expect(await balance()).toBe(FUNDS);
  });

  it('fails a message the provider refuses (4xx) and refunds it once', async () => {
    const id = await accepted();
    primary.failNext({ kind: 'error', code: 21211 });
    await run();
    expect(primary.requests).toHaveLength(1);
    expect(primary.requests[0]!.reply?.status).toBe(TWILIO_ERRORS[21211]!.status);
    expect(await state(id)).toMatchObject({ status: 'failed', error_code: '21211', refunded: 1 });
    expect(await refunds(id)).toEqual([PRICE]);
    expect(await balance()).toBe(FUNDS + PRICE);
    expect((await events(id)).map((e) => e.type)).toEqual(['message.failed']);
  });

  it('retries a timeout on the same gateway (flagged: it may have arrived), then sends it', async () => {
    const id = await accepted();
    primary.failNext({ kind: 'timeout' });
    await run();
    expect(primary.requests).toHaveLength(2);
    expect(await state(id)).toMatchObject({ status: 'sent', dispatch_uncertain: 1, refunded: 0 });
    expect(await refunds(id)).toEqual([]);
  });

  it('retries a 5xx, and gives up failed and refunded once when it goes on', async () => {
    const id = await accepted();
    primary.failFor(TO, { kind: 'status', status: 500 });
    await run();
    expect(primary.requests).toHaveLength(3);
    const s = await state(id);
    expect(s.status).toBe('failed');
    expect(s.refunded).toBe(1);
    expect(await refunds(id)).toEqual([PRICE]);
    expect(await balance()).toBe(FUNDS + PRICE);
  });

  it('moves a message the primary certainly did not take (connection refused) to the fallback, which sends it', async () => {
    backup.addAccount(TWILIO_SID, TWILIO_TOKEN);
    const gw = await addGateway(
      t.ctx,
      {
        kind: 'twilio',
        name: 'tw-backup',
        settings: { base_url: backup.url, account_sid: TWILIO_SID, rate_per_second: 10_000 },
        secrets: { auth_token: TWILIO_TOKEN },
      },
      'test',
    );
    const backupFrom = sender('sms');
    await addFallback(t.ctx, { partner: PARTNER, type: 'sms', gateway: gw.id, sender: backupFrom }, 'test');
    const id = await accepted();
    await primary.down();
    await run();
    expect(twilioSids(backup)).toHaveLength(1);
    expect(backup.requests[0]!.body).toMatchObject({ To: TO, From: backupFrom });
    expect(await state(id)).toMatchObject({
      status: 'sent',
      gateway_id: gw.id,
      provider_message_id: twilioSids(backup)[0],
    });
    expect((await events(id)).map((e) => e.type)).toEqual(['message.rerouted', 'message.sent']);
  });

  it('releases a scheduled message at its time and sends it', async () => {
    const at = Date.now() + 300;
    const id = await accepted({ status: 'scheduled', runAt: at });
    await run();
    expect(twilioSids(primary)).toHaveLength(1);
    expect(primary.requests[0]!.at).toBeGreaterThanOrEqual(at);
    expect(await state(id)).toMatchObject({ status: 'sent', refunded: 0 });
    const history = await t.ctx.store.all<{ status: string }>(
      sql`SELECT status FROM message_status_history WHERE message_id = ${id} ORDER BY id`,
    );
    expect(history.map((h) => h.status)).toEqual(['queued', 'sent']);
  });

  it('refuses at its time a scheduled message whose recipient was suppressed meanwhile: failed, refunded, not sent', async () => {
    const id = await accepted({ status: 'scheduled', runAt: Date.now() + 200 });
    await t.exec(
      `INSERT INTO suppressions (id, partner_id, channel, address, scope, reason, group_id, source, detail, created_at)
       VALUES ('sup_1', '${PARTNER}', 'sms', '${TO}', '', 'opt_out_keyword', '', 'test', NULL, ${Date.now()})`,
    );
    await run();
    expect(primary.requests).toHaveLength(0);
    expect(await state(id)).toMatchObject({ status: 'failed', error_code: 'recipient_suppressed', refunded: 1 });
    expect(await refunds(id)).toEqual([PRICE]);
    expect(await balance()).toBe(FUNDS + PRICE);
  });
});
