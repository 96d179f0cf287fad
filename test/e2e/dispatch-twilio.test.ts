import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseMoney } from '../../src/lib/money.js';
import { setupPartner, startTestServer, type PartnerSetup, type TestServer } from '../helpers/server.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { waitFor } from '../helpers/wait.js';
import { watchValue } from '../helpers/watch.js';
import { jsonText } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { postWebhook, twilioForm, twilioHeaders } from '../fakes/webhook-senders.js';
import { processed } from '../helpers/webhook-log.js';
import { adjust } from '../../src/core/ledger.js';
import { updateGateway } from '../../src/core/gateways.js';
import { FAST_DISPATCH, SMS, TWILIO_SID, TWILIO_TOKEN, send, twilioGateway } from '../helpers/gateways.js';
import { balanceOf, ledgerOf, jobsOf, message, waitStatus } from '../helpers/rows.js';
import { expectFailedAndRefunded, expectMoneyConsistent, expectSent } from '../helpers/expectations.js';

// SMS through the whole path: HTTP send -> accept -> dispatch job -> Twilio fake, and each
// outcome class back into the message row and the ledger.

let s: TestServer;
let fake: TwilioFake;
let p: PartnerSetup;
let gatewayId: string;
let from: string;
const PRICE = parseMoney('0.0075');

beforeAll(async () => {
  fake = await startTwilioFake();
  // Each test here follows one message through its retries on the one gateway they share: the
  // failures of one test (four timeouts, then a refused connection) would open that gateway's
  // circuit and hold the next tests' messages on the queue. The circuit is under test in
  // test/e2e/failover.test.ts, so here it never opens.
  s = await startTestServer({
    ...FAST_DISPATCH,
    'dispatch.circuitBreaker.consecutiveFailures': 1000,
    'dispatch.circuitBreaker.failureRate': 0,
  });
  p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.0075' } });
  const g = await twilioGateway(s.ctx, p.partnerId, fake);
  gatewayId = g.gateway.id;
  from = g.from;
});
afterAll(async () => {
  await s?.stop();
  await fake?.close();
});
beforeEach(() => fake.reset());

let n = 0;
async function sms(text = `code ${++n}`, to = '+14155550123') {
  const r = await send(s.url, SMS, { to, text }, p.token);
  expect(r.status, r.text).toBe(200);
  return r.body.id as string;
}

describe('twilio through the full path', () => {
  it('sends the exact request Twilio expects and stores the SM sid', async () => {
    const id = await sms('Your code is 123456', '+442071838750');
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests).toHaveLength(1);
    const req = fake.requests[0];
    expect(req.method).toBe('POST');
    expect(req.path).toBe(`/2010-04-01/Accounts/${TWILIO_SID}/Messages.json`);
    expect(req.headers.authorization).toBe(`Basic ${Buffer.from(`${TWILIO_SID}:${TWILIO_TOKEN}`).toString('base64')}`);
    expect(req.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(req.body).toEqual({
      To: '+442071838750',
      From: from,
      Body: 'Your code is 123456',
      StatusCallback: `${s.url}/api/webhook.php?gateway=${gatewayId}&message=${id}`,
    });
    expect(req.reply!.status).toBe(201);
    const sid = JSON.parse(req.reply!.body).sid;
    expect(sid).toMatch(/^SM[0-9a-f]{32}$/);
    // Its status callbacks name it by msgd's id (the StatusCallback URL): the SID is not indexed.
    await expectSent(s.ctx, m, sid, { indexed: false });
  });

  it('a StatusCallback goes to the listening address only for a provider on this machine, else to server.publicUrl or nowhere', async () => {
    // msgd listens on 127.0.0.1 here: the Twilio fake (loopback) can call back, api.twilio.com cannot.
    expect(s.rt.callbackBase(fake.url)).toBe(s.url);
    expect(s.rt.callbackBase('https://api.twilio.com')).toBeNull();
    expect(s.rt.callbackBase()).toBeNull();
    const pub = await startTestServer({ 'server.publicUrl': 'https://gw.example.com/' });
    try {
      expect(pub.rt.callbackBase('https://api.twilio.com')).toBe('https://gw.example.com');
      expect(pub.rt.callbackBase(fake.url)).toBe('https://gw.example.com');
    } finally {
      await pub.stop();
    }
  });

  it('a 429 with Retry-After is retried after the hint, then sent', async () => {
    fake.failNext({ kind: 'rate_limit', retryAfterS: 1 });
    const id = await sms();
    const m = await waitStatus(s.ctx, id, 'sent', 5_000);
    expect(fake.requests.map((r) => r.reply?.status)).toEqual([429, 201]);
    expect(fake.requests[1].at - fake.requests[0].at).toBeGreaterThanOrEqual(950);
    await expectSent(s.ctx, m, JSON.parse(fake.requests[1].reply!.body).sid);
  });

  it.each([
    ['a 500', { kind: 'status' as const, status: 500 }, false],
    ['a 503', { kind: 'status' as const, status: 503 }, false],
    // The request reached Twilio before the connection died: it may have been accepted.
    ['a connection reset', { kind: 'reset' as const }, true],
  ])('%s is retried, then sent', async (_name, fault, uncertain) => {
    fake.failNext(fault);
    const id = await sms();
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[0].body).toEqual(fake.requests[1].body);
    await expectSent(s.ctx, m, JSON.parse(fake.requests[1].reply!.body).sid, { uncertain });
  });

  it('a timeout (no answer within dispatch.timeoutMs) is retried, then sent, flagged a possible duplicate', async () => {
    fake.failNext({ kind: 'timeout' });
    const id = await sms();
    const m = await waitStatus(s.ctx, id, 'sent');
    expect(fake.requests).toHaveLength(2);
    expect(fake.requests[0].reply).toBeUndefined();
    expect(fake.requests[1].at - fake.requests[0].at).toBeGreaterThanOrEqual(250);
    await expectSent(s.ctx, m, JSON.parse(fake.requests[1].reply!.body).sid, { uncertain: true });
  });

  it('every attempt timing out: failed as outcome_unknown, flagged, and refunded like any message out of retries', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failFor('+14155550166', { kind: 'timeout' });
    try {
      const id = await sms(undefined, '+14155550166');
      const m = await waitStatus(s.ctx, id, 'failed', 15_000);
      expect(fake.requests).toHaveLength(FAST_DISPATCH['jobs.maxAttempts']);
      expect({ code: m.error_code, refunded: m.refunded, uncertain: m.dispatch_uncertain }).toEqual({
        code: 'outcome_unknown',
        refunded: 1,
        uncertain: 1,
      });
      expect(m.error_message).toMatch(
        /may have reached the provider \(refunded; the operator can check with the provider\)/,
      );
      await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'outcome_unknown', start);
    } finally {
      fake.clearFaults();
    }
  });

  it('provider unreachable (connection refused) until retries run out: failed, refunded, not flagged', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    await fake.down();
    try {
      const id = await sms();
      const m = await waitStatus(s.ctx, id, 'failed', 15_000);
      await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'retries_exhausted', start);
      expect(m.dispatch_uncertain).toBe(0);
    } finally {
      await fake.up();
    }
  });

  // Each its own recipient: a 21610 puts its recipient on the suppression list (docs/suppressions.md).
  it.each([
    [21211, /not a valid phone number/, '+14155550191'],
    [21610, /unsubscribed/, '+14155550192'],
    [21408, /Permission/, '+14155550193'],
  ])('permanent error %i: failed with the provider code and message, refunded', async (code, text, to) => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failFor(to, { kind: 'error', code });
    const id = await sms(undefined, to);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(start - PRICE);
    const m = await waitStatus(s.ctx, id, 'failed');
    expect(m.error_message).toMatch(text);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, String(code), start);
    expect(fake.requests).toHaveLength(1);
    expect(await jobsOf(s.ctx, id)).toEqual([]);
  });

  it('bad credentials (20003, HTTP 401) fail at once and refund', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.accounts.set(TWILIO_SID, 'rotated-token');
    try {
      const id = await sms();
      const m = await waitStatus(s.ctx, id, 'failed');
      expect(m.error_message).toBe('Authenticate');
      await expectFailedAndRefunded(s.ctx, p.partnerId, m, '20003', start);
      expect(fake.requests).toHaveLength(1);
    } finally {
      fake.accounts.set(TWILIO_SID, TWILIO_TOKEN);
    }
  });

  it("a provider answer that echoes the credentials is stored without them, for the partner's error.message and the job's note", async () => {
    const basic = Buffer.from(`${TWILIO_SID}:${TWILIO_TOKEN}`).toString('base64');
    const echo = (code: number, status: number) => ({
      code,
      message: `Authenticate Basic ${basic} (token ${TWILIO_TOKEN})`,
      status,
    });
    fake.failNext({ kind: 'status', status: 503, body: echo(20500, 503) });
    fake.failNext({ kind: 'status', status: 400, body: echo(21211, 400) });
    const id = await sms();
    const m = await waitStatus(s.ctx, id, 'failed');
    expect(fake.requests).toHaveLength(2);
    expect(m.error_message).toBe('Authenticate Basic [redacted] (token [redacted])');
    const stored =
      JSON.stringify(await s.ctx.store.all(sql`SELECT * FROM message_status_history WHERE message_id = ${id}`)) +
      JSON.stringify(await jobsOf(s.ctx, id)) +
      s.logs.join('');
    expect(stored).not.toContain(TWILIO_TOKEN);
    expect(stored).not.toContain(basic);
  });

  /** Every attempt to this number times out: the message ends failed as outcome_unknown, refunded. */
  async function unknownOutcome(text: string, to: string) {
    fake.failFor(to, { kind: 'timeout' });
    try {
      const id = await sms(text, to);
      await waitStatus(s.ctx, id, 'failed', 15_000);
      return id;
    } finally {
      fake.clearFaults();
    }
  }

  /** Twilio's status callback for one of those attempts, at the URL msgd gave it. */
  async function twilioReports(id: string, to: string, status: string) {
    const callback = fake.requests.find((r) => r.body?.To === to)!.body.StatusCallback as string;
    expect(callback).toBe(`${s.url}/api/webhook.php?gateway=${gatewayId}&message=${id}`);
    const params = {
      AccountSid: TWILIO_SID,
      ApiVersion: '2010-04-01',
      From: from,
      MessageSid: `SM${to.slice(1).padStart(32, '5')}`,
      MessageStatus: status,
      To: to,
    };
    const res = await postWebhook(callback, twilioForm(params), twilioHeaders(TWILIO_TOKEN, callback, params));
    expect(res.status).toBe(200);
    return processed(s.ctx, res.headers.get('x-msgd-webhook-id')!);
  }

  it('a refunded outcome_unknown message that Twilio then reports delivered is charged again, once', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    const to = '+14155550167';
    const id = await unknownOutcome('arrived after all', to);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(start);
    // One attempt did reach Twilio: its callback names the message, though msgd never saw its SID.
    expect((await twilioReports(id, to, 'delivered')).processing).toBe('processed');
    // Twilio sends the same callback again: nothing more is charged.
    expect((await twilioReports(id, to, 'delivered')).processing).toBe('duplicate');
    const m = await message(s.ctx, id);
    expect({ status: m.status, refunded: m.refunded, possibleDuplicate: m.dispatch_uncertain }).toEqual({
      status: 'delivered',
      refunded: 0,
      possibleDuplicate: 1,
    });
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(start - PRICE);
    expect(
      (await ledgerOf(s.ctx, p.partnerId)).filter((e) => e.message_id === id).map((e) => [e.kind, e.amount, e.note]),
    ).toEqual([
      ['debit', -PRICE, null],
      ['refund', PRICE, expect.stringMatching(/^refund: failed \(outcome_unknown\)/)],
      ['debit', -PRICE, 'charged again: delivered after the refund'],
    ]);
    await expectMoneyConsistent(s.ctx, p.partnerId);
  });

  it('is not charged again past the credit limit: a refunded message reported delivered then stays refunded', async () => {
    const to = '+14155550168';
    const id = await unknownOutcome('arrived, but the money is gone', to);
    const left = await balanceOf(s.ctx, p.partnerId);
    await adjust(s.ctx, p.partnerId, -left, 'spent elsewhere', 'test');
    try {
      expect((await twilioReports(id, to, 'delivered')).processing).toBe('processed');
      expect(await message(s.ctx, id)).toMatchObject({ status: 'delivered', refunded: 1 });
      expect(await balanceOf(s.ctx, p.partnerId)).toBe(0);
      expect((await ledgerOf(s.ctx, p.partnerId)).filter((e) => e.message_id === id).map((e) => e.kind)).toEqual([
        'debit',
        'refund',
      ]);
    } finally {
      await adjust(s.ctx, p.partnerId, left, 'back', 'test');
    }
    await expectMoneyConsistent(s.ctx, p.partnerId);
  });

  it('retries exhausted: failed, refunded, and the job is dead for the operator', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    fake.failFor('+14155550177', { kind: 'status', status: 503 });
    const id = await sms(undefined, '+14155550177');
    const m = await waitStatus(s.ctx, id, 'failed', 10_000);
    expect(fake.requests).toHaveLength(FAST_DISPATCH['jobs.maxAttempts']);
    await expectFailedAndRefunded(s.ctx, p.partnerId, m, 'retries_exhausted', start);
    expect(m.error_message).toMatch(/gave up after 4 attempts/);
    const jobs = await jobsOf(s.ctx, id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ state: 'dead', attempts: 4, max_attempts: 4 });
    expect(jobs[0].last_error).toMatch(/20500/);
    // The operator watching msgd's log sees it too.
    const line = s.logs
      .map((l) => JSON.parse(l))
      .find((l) => l.msg?.startsWith('job dead') && l.payload?.message_id === id);
    expect(line).toMatchObject({
      level: 40,
      kind: 'message.dispatch',
      attempts: 4,
      error: expect.stringMatching(/20500/),
    });
  });

  it('a disabled gateway pauses its queue: the message waits, saying why, spends no attempt, and goes out once enabled', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    // A rate limit with a second's hint: the disable lands before the next attempt.
    fake.failFor('+14155550166', { kind: 'rate_limit', retryAfterS: 1 });
    const id = await sms('paused', '+14155550166');
    await waitFor(() => fake.requests.length >= 1, 'the first attempt', 5_000);
    await updateGateway(s.ctx, gatewayId, { status: 'disabled' }, 'test');
    try {
      await waitFor(
        async () => (await message(s.ctx, id)).error_code === 'gateway_disabled',
        'the message to say why it waits',
        5_000,
      );
      const tried = fake.requests.length;
      const snoozedBefore = s.rt.worker.counters.snoozed;
      // Long past what four attempts with this backoff take: still waiting, not failed. It is
      // looked at again every second or so, in the claim itself: never seen 'sending' (claimed
      // with nothing in flight, which a crash would flag a possible duplicate).
      const status = await watchValue(s, sql`SELECT status FROM messages WHERE id = ${id}`);
      const job = await watchValue(
        s,
        sql`SELECT state FROM jobs WHERE ${jsonText(s.ctx.store.dialect, 'payload', 'message_id')} = ${id}`,
      );
      // Looked at again and put back, twice over, without ever being sent or failed.
      await waitFor(() => s.rt.worker.counters.snoozed > snoozedBefore + 1, 'the job to be put back twice', 10_000);
      expect(await status.stop()).toEqual(['queued']);
      expect(await job.stop()).toEqual(['available']);
      expect(await message(s.ctx, id)).toMatchObject({ status: 'queued', error_code: 'gateway_disabled', refunded: 0 });
      expect((await message(s.ctx, id)).error_message).toMatch(/is disabled: the message waits until it is enabled/);
      expect((await jobsOf(s.ctx, id))[0].attempts).toBeLessThan(FAST_DISPATCH['jobs.maxAttempts']);
      expect(fake.requests).toHaveLength(tried);
    } finally {
      fake.reset();
      await updateGateway(s.ctx, gatewayId, { status: 'active' }, 'test');
    }
    const m = await waitStatus(s.ctx, id, 'sent', 5_000);
    expect(m).toMatchObject({ error_code: null, error_message: null });
    expect(fake.requests).toHaveLength(1);
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(start - PRICE);
  });

  it('a status that moved on while the call was in flight is kept: the acceptance is history, its sid stored', async () => {
    fake.failNext({ kind: 'latency', ms: 300 });
    const id = await sms();
    await waitFor(() => fake.requests.length === 1, 'the call to reach Twilio', 5_000);
    // Ahead of the answer, the message moves past 'sending' (written here directly).
    await s.ctx.store.run(sql`UPDATE messages SET status = 'delivered' WHERE id = ${id}`);
    await waitFor(async () => (await jobsOf(s.ctx, id)).length === 0, 'the dispatch job to settle', 5_000);
    const m = await message(s.ctx, id);
    expect({ status: m.status, provider: m.provider_message_id }).toEqual({
      status: 'delivered',
      provider: JSON.parse(fake.requests[0].reply!.body).sid,
    });
    const sent = await s.ctx.store.all<{ ignored: number }>(
      sql`SELECT ignored FROM message_status_history WHERE message_id = ${id} AND status = 'sent'`,
    );
    expect(sent).toEqual([{ ignored: 1 }]);
    const events = await s.ctx.store.all(
      sql`SELECT type FROM events WHERE ${jsonText(s.ctx.store.dialect, 'payload', 'message_id')} = ${id}`,
    );
    expect(events).toEqual([]);
  });

  it('the sent event carries what the partner needs: its message, channel, recipient and the move from sending', async () => {
    const id = await sms('event shape', '+14155550199');
    await waitStatus(s.ctx, id, 'sent');
    const rows = await s.ctx.store.all<{ type: string; payload: string }>(
      sql`SELECT type, payload FROM events WHERE ${jsonText(s.ctx.store.dialect, 'payload', 'message_id')} = ${id}`,
    );
    expect(rows.map((r) => r.type)).toEqual(['message.sent']);
    const payload = JSON.parse(rows[0].payload);
    expect(payload).toMatchObject({
      event: 'message.sent',
      message_id: id,
      channel: 'sms',
      to: '+14155550199',
      status: 'sent',
      previous_status: 'sending',
      provider_status: 'queued',
      error: null,
    });
    const m = await message(s.ctx, id);
    expect(Date.parse(payload.occurred_at)).toBe(m.sent_at);
    // The history entry the partner reads: Twilio's own status word, at the hand-over.
    expect(
      await s.ctx.store.all(
        sql`SELECT status, provider_status, ignored, occurred_at FROM message_status_history WHERE message_id = ${id}`,
      ),
    ).toEqual([{ status: 'sent', provider_status: 'queued', ignored: 0, occurred_at: m.sent_at }]);
  });

  it('a later failure never refunds twice, and a sent message is never refunded', async () => {
    const start = await balanceOf(s.ctx, p.partnerId);
    const ids = [await sms(), await sms(), await sms()];
    for (const id of ids) await waitStatus(s.ctx, id, 'sent');
    expect(await balanceOf(s.ctx, p.partnerId)).toBe(start - 3 * PRICE);
    for (const id of ids) expect((await message(s.ctx, id)).refunded).toBe(0);
  });
});
