import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { addFallback } from '../../src/core/channels.js';
import { readCircuit } from '../../src/core/circuits.js';
import { addGateway } from '../../src/core/gateways.js';
import { verifyLedger } from '../../src/core/ledger.js';
import { messageHistoryIn } from '../../src/core/messages.js';
import { jsonText } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { setPrice } from '../../src/core/prices.js';
import { DISPATCH_JOB } from '../../src/jobs/dispatch.js';
import { parseMoney } from '../../src/lib/money.js';
import { startSendgridFake, type SendgridFake } from '../fakes/sendgrid.js';
import { startSmtpFake, type SmtpFake } from '../fakes/smtp.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import {
  EMAIL,
  send,
  sender,
  sendgridGateway,
  SMS,
  smtpGateway,
  TWILIO_SID,
  TWILIO_TOKEN,
  twilioGateway,
} from '../helpers/gateways.js';
import { balanceOf, jobsOf, ledgerOf, message, messagesOf } from '../helpers/rows.js';
import { storeOutboundSmsIn } from '../helpers/outbound.js';
import { setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sleep, waitFor } from '../helpers/wait.js';

// Failover between SMS gateways with real fake Twilio servers on 127.0.0.1: a message moves to
// the partner's fallback only when the primary certainly did not take it, is sent once, and is
// charged the price of the gateway that sent it, to the micro-unit.

const OPEN_MS = 4000;
const METRICS_TOKEN = 'metrics-token-failover-0123456789';

async function scrape(): Promise<string> {
  const r = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  expect(r.status).toBe(200);
  return r.text();
}
let s: TestServer;
let primary: TwilioFake;
let backup: TwilioFake;
let sendgrid: SendgridFake;
let smtp: SmtpFake;

beforeAll(async () => {
  primary = await startTwilioFake();
  backup = await startTwilioFake();
  sendgrid = await startSendgridFake();
  smtp = await startSmtpFake();
  s = await startTestServer({
    'dispatch.timeoutMs': 600,
    'jobs.backoffBaseMs': 20,
    'jobs.backoffCapMs': 1000,
    'jobs.maxAttempts': 50,
    'dispatch.circuitBreaker.consecutiveFailures': 3,
    'dispatch.circuitBreaker.failureRate': 0,
    'dispatch.circuitBreaker.openMs': OPEN_MS,
    'dispatch.circuitBreaker.halfOpenProbes': 1,
    'metrics.token': METRICS_TOKEN,
  });
});
afterAll(async () => {
  await s?.stop();
  await primary?.close();
  await backup?.close();
  await sendgrid?.close();
  await smtp?.close();
});
beforeEach(async () => {
  await primary.up();
  await backup.up();
  primary.reset();
  backup.reset();
});
afterEach(async () => {
  await primary.up();
});

/** A partner whose SMS goes through `primary`, with `backup` as its fallback (its own sender and price). */
async function partnerWithFallback(opts: { balance: string; price: string; backupPrice: string }) {
  const p = await setupPartner(s.ctx, { balance: opts.balance, prices: { sms: opts.price } });
  const main = await twilioGateway(s.ctx, p.partnerId, primary);
  backup.addAccount(TWILIO_SID, TWILIO_TOKEN);
  const gw = await addGateway(
    s.ctx,
    {
      kind: 'twilio',
      name: `tw-backup-${Math.random().toString(36).slice(2, 8)}`,
      settings: { base_url: backup.url, account_sid: TWILIO_SID, rate_per_second: 10_000 },
      secrets: { auth_token: TWILIO_TOKEN },
    },
    'test',
  );
  const backupFrom = sender('sms');
  await addFallback(s.ctx, { partner: p.partnerId, type: 'sms', gateway: gw.id, sender: backupFrom }, 'test');
  await setPrice(s.ctx, { channel: 'sms', amount: parseMoney(opts.backupPrice), gateway: gw.id }, 'test');
  return { ...p, primaryId: main.gateway.id, backupId: gw.id, backupFrom };
}

async function sendSms(token: string, text: string, to = '+14155550123'): Promise<string> {
  const r = await send(s.url, SMS, { to, text }, token);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.id as string;
}

const bodies = (fake: TwilioFake) => fake.requests.filter((r) => r.reply?.status === 201).map((r) => r.body.Body);

describe('failover to the fallback gateway', () => {
  it('a primary down for a window: every message sent once through the fallback, then back to the primary once its circuit closes', async () => {
    const p = await partnerWithFallback({ balance: '10', price: '0.01', backupPrice: '0.015' });
    await primary.down();
    const ids: string[] = [];
    const rerouted = async (id: string) =>
      (await messageHistoryIn(s.ctx.store, id)).some((h) => h.status === 'rerouted');
    for (let i = 0; i < 8; i++) {
      ids.push(await sendSms(p.token, `outage ${i}`));
      // The first three fail on the primary one after another (each moved on before the next is
      // sent, whatever the store's pace): the third opens its circuit.
      if (i < 3) await waitFor(() => rerouted(ids[i]), `outage ${i} moved to the fallback`, 10_000);
    }
    await waitFor(
      async () => (await Promise.all(ids.map((id) => message(s.ctx, id)))).every((m) => m.status === 'sent'),
      'every message of the outage sent',
      15_000,
    );
    // The first failures opened the primary's circuit; the messages after it never tried the
    // primary. Read while it is still open (for OPEN_MS from the third failure).
    const circuit = (await readCircuit(s.ctx, p.primaryId))!;
    expect(circuit.state).toBe('open');
    const during = await scrape();
    // Sent once each, all through the fallback, from its own sender.
    expect(bodies(backup).sort()).toEqual(ids.map((_, i) => `outage ${i}`).sort());
    expect(backup.requests.every((r) => r.body.From === p.backupFrom)).toBe(true);
    for (const id of ids) {
      const m = await message(s.ctx, id);
      expect(m.gateway_id).toBe(p.backupId);
      expect(m.from).toBe(p.backupFrom);
      expect(m.price).toBe(parseMoney('0.015'));
      const hist = await messageHistoryIn(s.ctx.store, id);
      const moved = hist.find((h) => h.status === 'rerouted')!;
      expect(moved.error_code === 'network_error' || moved.error_code === 'circuit_open').toBe(true);
      expect(moved.error_message).toContain('→ tw-backup-');
      expect(hist.map((h) => h.status)).toEqual(['queued', 'rerouted', 'sent']);
    }
    expect(during).toContain(`msgd_gateway_circuit_state{gateway="${p.primaryId}"} 2`);
    expect(during).toContain(`msgd_gateway_circuit_opened_total{gateway="${p.primaryId}"} 1`);
    expect(during).toContain(
      `msgd_dispatch_failovers_total{gateway="${p.primaryId}",to="${p.backupId}",outcome="rerouted"} 8`,
    );
    expect(circuit.opened).toBe(1);
    const reasons: (string | null)[] = [];
    for (const id of ids)
      reasons.push((await messageHistoryIn(s.ctx.store, id)).find((h) => h.status === 'rerouted')!.error_code);
    expect(reasons.filter((r) => r === 'network_error')).toHaveLength(3);
    expect(reasons.filter((r) => r === 'circuit_open')).toHaveLength(5);
    expect(s.logs.join('')).toMatch(/circuit open for 4s: 3 failed calls in a row/);

    // Each message: charged 0.01 at accept, then the 0.005 difference before the fallback's call.
    const entries = (await ledgerOf(s.ctx, p.partnerId)).filter((e) => e.message_id !== null);
    for (const id of ids) {
      const mine = entries.filter((e) => e.message_id === id);
      expect(mine.map((e) => [e.kind, e.amount])).toEqual([
        ['debit', -parseMoney('0.01')],
        ['debit', -parseMoney('0.005')],
      ]);
      expect(mine[1].note).toMatch(
        /^rerouted twilio-.* → tw-backup-.* \((network_error|circuit_open)\): price difference$/,
      );
    }
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('10') - 8 * parseMoney('0.015'));
    expect((await verifyLedger(s.ctx)).ok).toBe(true);

    // The primary comes back; once the back-off is over, a probe closes its circuit.
    await primary.up();
    await sleep(OPEN_MS + 100);
    const probe = await sendSms(p.token, 'probe');
    await waitFor(async () => (await message(s.ctx, probe)).status === 'sent', 'the probe sent', 10_000);
    expect((await message(s.ctx, probe)).gateway_id).toBe(p.primaryId);
    expect((await readCircuit(s.ctx, p.primaryId))!.state).toBe('closed');
    expect(await scrape()).toContain(`msgd_gateway_circuit_state{gateway="${p.primaryId}"} 0`);
    const after: string[] = [];
    for (let i = 0; i < 4; i++) after.push(await sendSms(p.token, `after ${i}`));
    await waitFor(
      async () => (await Promise.all(after.map((id) => message(s.ctx, id)))).every((m) => m.status === 'sent'),
      'the later messages sent',
      10_000,
    );
    expect(bodies(primary).sort()).toEqual(['after 0', 'after 1', 'after 2', 'after 3', 'probe']);
    for (const id of after) {
      expect((await message(s.ctx, id)).gateway_id).toBe(p.primaryId);
      expect((await message(s.ctx, id)).price).toBe(parseMoney('0.01'));
    }
    expect(bodies(backup)).toHaveLength(8);
    expect(s.logs.join('')).toMatch(/circuit half-open/);
    expect(s.logs.join('')).toMatch(/circuit closed, the gateway takes calls again/);

    // The failover traffic is counted per gateway, and /metrics shows it with the circuits.
    const moved = s.rt.counters
      .snapshot()
      .filter((c) => c.name === 'msgd_dispatch_failovers_total' && c.labels.gateway === p.primaryId);
    expect(moved).toEqual([
      {
        name: 'msgd_dispatch_failovers_total',
        labels: { gateway: p.primaryId, to: p.backupId, outcome: 'rerouted' },
        value: 8,
      },
    ]);
  }, 60_000);

  it('without a fallback, an open circuit holds the messages on the queue (never refused) until a probe succeeds', async () => {
    const p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.01' } });
    const main = await twilioGateway(s.ctx, p.partnerId, primary);
    await primary.down();
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await sendSms(p.token, `alone ${i}`));
    await waitFor(
      async () =>
        (await Promise.all(ids.map((id) => message(s.ctx, id)))).every((m) => m.error_code === 'gateway_circuit_open'),
      'every message waiting for the circuit',
      10_000,
    );
    for (const id of ids) {
      expect((await message(s.ctx, id)).status).toBe('queued');
      expect((await message(s.ctx, id)).error_message).toContain('its circuit is open');
    }
    expect((await readCircuit(s.ctx, main.gateway.id))!.state).toBe('open');
    await primary.up();
    await waitFor(
      async () => (await Promise.all(ids.map((id) => message(s.ctx, id)))).every((m) => m.status === 'sent'),
      'all sent once it closed',
      15_000,
    );
    expect(bodies(primary).sort()).toEqual(ids.map((_, i) => `alone ${i}`).sort());
    expect((await Promise.all(ids.map((id) => message(s.ctx, id)))).every((m) => m.error_code === null)).toBe(true);
    expect((await readCircuit(s.ctx, main.gateway.id))!.state).toBe('closed');
    expect((await verifyLedger(s.ctx)).ok).toBe(true);
  }, 30_000);

  it('a timeout after the request left ("maybe delivered") never moves to the fallback', async () => {
    const p = await partnerWithFallback({ balance: '10', price: '0.01', backupPrice: '0.02' });
    primary.failNext({ kind: 'timeout', count: 1 });
    const id = await sendSms(p.token, 'maybe');
    await waitFor(async () => (await message(s.ctx, id)).status === 'sent', 'the message sent', 10_000);
    // Retried on the primary (which may have it twice), flagged, never sent through the fallback.
    expect(primary.requests.map((r) => r.body.Body)).toEqual(['maybe', 'maybe']);
    expect(backup.requests).toHaveLength(0);
    const m = await message(s.ctx, id);
    expect(m.gateway_id).toBe(p.primaryId);
    expect(m.dispatch_uncertain).toBe(1);
    expect(m.price).toBe(parseMoney('0.01'));
    expect((await messageHistoryIn(s.ctx.store, id)).map((h) => h.status)).toEqual(['queued', 'sent']);
  }, 30_000);

  it('a call in flight when msgd died, met by an open circuit, never moves to the fallback and stays flagged', async () => {
    const p = await partnerWithFallback({ balance: '10', price: '0.01', backupPrice: '0.01' });
    const channel = (await s.ctx.store.get<{ id: string; gateway_id: string; sender: string }>(
      sql`SELECT id, gateway_id, sender FROM channels WHERE partner_id = ${p.partnerId} AND gateway_id = ${p.primaryId}`,
    ))!;
    // What a msgd killed mid-call leaves: the message 'sending', its request maybe at Twilio.
    const m = {
      id: await s.ctx.store.transaction((tx) =>
        storeOutboundSmsIn(tx, s.ctx, p.partnerId, channel, { text: 'in flight when msgd died', price: 10_000 }),
      ),
    };
    await s.ctx.store.run(sql`UPDATE messages SET status = 'sending', dispatch_in_flight = 1 WHERE id = ${m.id}`);
    // The primary failing since the start: its circuit is open when the message comes up.
    for (let i = 0; i < 3; i++) s.rt.breakers.record(p.primaryId, false, 'test outage');
    expect(s.rt.breakers.state(p.primaryId)).toBe('open');
    await s.ctx.store.transaction((tx) =>
      s.rt.queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: m.id } }),
    );
    await waitFor(
      async () => (await message(s.ctx, m.id)).error_code === 'gateway_circuit_open',
      'the message to wait',
      5_000,
    );
    // Woken while the circuit is still open (a gateway change or a restart wakes the queue).
    await s.ctx.store.run(
      sql`UPDATE jobs SET run_at = ${Date.now()} WHERE state = 'available' AND ${jsonText(s.ctx.store.dialect, 'payload', 'message_id')} = ${m.id}`,
    );
    await waitFor(async () => (await message(s.ctx, m.id)).status === 'sent', 'the message sent', 10_000);
    expect(backup.requests).toHaveLength(0);
    expect(primary.requests.map((r) => r.body.Body)).toEqual(['in flight when msgd died']);
    expect(await message(s.ctx, m.id)).toMatchObject({ gateway_id: p.primaryId, dispatch_uncertain: 1 });
  }, 30_000);

  it("a refusal about the recipient fails the message on the primary; one about the route's sender moves on", async () => {
    const p = await partnerWithFallback({ balance: '10', price: '0.01', backupPrice: '0.01' });
    primary.failNext({ kind: 'error', code: 21211, count: 1 });
    const bad = await sendSms(p.token, 'invalid number');
    await waitFor(async () => (await message(s.ctx, bad)).status === 'failed', 'the message failed', 10_000);
    expect((await message(s.ctx, bad)).error_code).toBe('21211');
    expect((await message(s.ctx, bad)).refunded).toBe(1);
    expect(backup.requests).toHaveLength(0);

    primary.failNext({
      kind: 'error',
      code: 21606,
      message: 'The From phone number is not a valid, SMS-capable inbound phone number',
      count: 1,
    });
    const moved = await sendSms(p.token, 'sender refused');
    await waitFor(async () => (await message(s.ctx, moved)).status === 'sent', 'the message sent', 10_000);
    expect(bodies(backup)).toEqual(['sender refused']);
    const hop = (await messageHistoryIn(s.ctx.store, moved)).find((h) => h.status === 'rerouted')!;
    expect(hop.error_code).toBe('21606');
    // Same price on both routes: no ledger entry beyond the accept's debit.
    expect((await ledgerOf(s.ctx, p.partnerId)).filter((e) => e.message_id === moved).map((e) => e.kind)).toEqual([
      'debit',
    ]);
  }, 30_000);

  it("refusals about the recipient never open the gateway's circuit: each fails at once, refunded, and the next goes out", async () => {
    const p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.01' } });
    const main = await twilioGateway(s.ctx, p.partnerId, primary);
    // More than consecutiveFailures (3) in a row, the region and route refusals last: Twilio
    // reaches other numbers from this account, so none says the gateway is failing.
    // Each to its own recipient: a 21610 puts its recipient on the suppression list.
    const codes = [21211, 21610, 21408, 21612, 21408];
    for (const [i, code] of codes.entries()) {
      primary.failNext({ kind: 'error', code, count: 1 });
      const id = await sendSms(p.token, `refused ${code}`, `+1415555014${i}`);
      await waitFor(
        async () => (await message(s.ctx, id)).status === 'failed',
        `the ${code} refusal to fail the message`,
        10_000,
      );
      expect(await message(s.ctx, id)).toMatchObject({ error_code: String(code), refunded: 1 });
    }
    expect(primary.requests).toHaveLength(codes.length);
    expect(s.rt.breakers.state(main.gateway.id)).toBe('closed');
    expect((await readCircuit(s.ctx, main.gateway.id))?.opened ?? 0).toBe(0);
    const ok = await sendSms(p.token, 'goes out');
    await waitFor(async () => (await message(s.ctx, ok)).status === 'sent', 'the next message sent', 10_000);
    expect((await message(s.ctx, ok)).error_code).toBeNull();
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(parseMoney('10') - parseMoney('0.01'));
    expect((await verifyLedger(s.ctx)).ok).toBe(true);
  }, 60_000);

  it("a relay deferring one recipient (greylisting at RCPT TO) never opens the gateway's circuit", async () => {
    smtp.reset();
    const p = await setupPartner(s.ctx, { balance: '10', prices: { email: '0.001' } });
    const relay = await smtpGateway(s.ctx, p.partnerId, smtp);
    const mail = (to: string, subject: string) =>
      send(s.url, EMAIL, { to, subject, html: '<p>x</p>' }, p.token).then((r) => {
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        return r.body.id as string;
      });
    smtp.failFor('late@greylist.example', {
      kind: 'reply',
      code: 450,
      message:
        '4.2.0 <late@greylist.example>: Recipient address rejected: Greylisted, see http://postgrey.schweikert.ch/',
    });
    const grey = await mail('late@greylist.example', 'greylisted');
    const attempts = async () => (await jobsOf(s.ctx, grey))[0]?.attempts ?? 0;
    // More deferrals in a row than consecutiveFailures (3): the relay answers, so it is working.
    await waitFor(
      async () => (await attempts()) >= 5 || s.rt.breakers.state(relay.gateway.id) !== 'closed',
      'five deferred attempts',
      10_000,
    );
    expect(s.rt.breakers.state(relay.gateway.id)).toBe('closed');
    expect(await message(s.ctx, grey)).toMatchObject({ status: 'sending', error_code: 'smtp_450' });
    const ok = await mail('user@example.com', 'goes out');
    await waitFor(async () => (await message(s.ctx, ok)).status === 'sent', 'the other mail sent', 5_000);
    expect(smtp.messages.map((m) => m.subject)).toEqual(['goes out']);
    smtp.reset();
    await waitFor(
      async () => (await message(s.ctx, grey)).status === 'sent',
      'the greylisted mail sent on a retry',
      5_000,
    );
    expect((await verifyLedger(s.ctx)).ok).toBe(true);
  }, 30_000);

  it('a cheaper fallback refunds the difference; a dearer one the funds do not cover fails the message and refunds it', async () => {
    const cheap = await partnerWithFallback({ balance: '1', price: '0.01', backupPrice: '0.004' });
    await primary.down();
    const id = await sendSms(cheap.token, 'cheaper');
    await waitFor(
      async () => (await message(s.ctx, id)).status === 'sent',
      'sent through the cheaper fallback',
      10_000,
    );
    expect(
      (await ledgerOf(s.ctx, cheap.partnerId)).filter((e) => e.message_id === id).map((e) => [e.kind, e.amount]),
    ).toEqual([
      ['debit', -parseMoney('0.01')],
      ['refund', parseMoney('0.006')],
    ]);
    expect((await message(s.ctx, id)).price).toBe(parseMoney('0.004'));

    // 0.01 left: the primary's price, but not the fallback's 0.05.
    const poor = await partnerWithFallback({ balance: '0.01', price: '0.01', backupPrice: '0.05' });
    const before = backup.requests.length;
    const lost = await sendSms(poor.token, 'too dear');
    await waitFor(async () => (await message(s.ctx, lost)).status === 'failed', 'the message failed', 10_000);
    const m = await message(s.ctx, lost);
    expect(m.error_code).toBe('insufficient_balance');
    expect(m.error_message).toMatch(/costs 0\.05/);
    expect(m.refunded).toBe(1);
    expect(backup.requests.length).toBe(before);
    expect(await balanceOf(s.ctx, poor.partnerId)).toBe(parseMoney('0.01'));
    expect((await verifyLedger(s.ctx)).ok).toBe(true);
    // Every message of these partners: what the ledger took equals the price of what was sent.
    for (const pid of [cheap.partnerId, poor.partnerId])
      for (const msg of await messagesOf(s.ctx, pid)) {
        const cost = (await ledgerOf(s.ctx, pid))
          .filter((e) => e.message_id === msg.id)
          .reduce((n, e) => n - e.amount, 0);
        expect(cost).toBe(msg.refunded ? 0 : msg.price);
      }
  }, 30_000);

  it('email: SendGrid answering 503 (not accepted) moves the mail to the SMTP fallback, sent once from its sender', async () => {
    sendgrid.reset();
    smtp.reset();
    const p = await setupPartner(s.ctx, { balance: '10', prices: { email: '0.001' } });
    await sendgridGateway(s.ctx, p.partnerId, sendgrid);
    const relay = await addGateway(
      s.ctx,
      {
        kind: 'smtp',
        name: `relay-${Math.random().toString(36).slice(2, 8)}`,
        settings: { host: smtp.host, port: smtp.port, secure: false, rate_per_second: 10_000 },
      },
      'test',
    );
    const relayFrom = sender('email');
    await addFallback(s.ctx, { partner: p.partnerId, type: 'email', gateway: relay.id, sender: relayFrom }, 'test');
    sendgrid.failNext({ kind: 'status', status: 503, count: 1 });
    const r = await send(s.url, EMAIL, { to: 'user@example.com', subject: 'moved', html: '<p>x</p>' }, p.token);
    expect(r.status).toBe(200);
    const id = r.body.id as string;
    await waitFor(async () => (await message(s.ctx, id)).status === 'sent', 'the mail sent', 10_000);
    expect(smtp.messages.map((m) => m.subject)).toEqual(['moved']);
    expect((await message(s.ctx, id)).gateway_id).toBe(relay.id);
    expect((await message(s.ctx, id)).from).toBe(relayFrom);
    expect((await messageHistoryIn(s.ctx.store, id)).find((h) => h.status === 'rerouted')!.error_code).toBe(
      'sendgrid_503',
    );
  }, 30_000);
});
