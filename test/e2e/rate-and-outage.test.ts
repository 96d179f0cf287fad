import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { keptStore, serverStore, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { storeOutboundSmsIn } from '../helpers/outbound.js';
import { inList, jsonText } from '../../src/db/dialect.js';
import { sql } from '../../src/db/sql.js';
import { DISPATCH_JOB } from '../../src/jobs/dispatch.js';
import { sleep, waitFor } from '../helpers/wait.js';
import { testClock } from '../helpers/clock.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { startSmtpFake, type SmtpFake } from '../fakes/smtp.js';
import { removeGateway, updateGateway } from '../../src/core/gateways.js';
import { unassignChannel } from '../../src/core/channels.js';
import { EMAIL, SMS, send, smtpGateway, twilioGateway } from '../helpers/gateways.js';
import { messagesOf } from '../helpers/rows.js';
import { expectMoneyConsistent } from '../helpers/expectations.js';

// Throughput is shaped per gateway by queueing, never by refusing; a provider outage holds
// messages in retry and loses none.

let s: TestServer;
let twilio: TwilioFake;

const LINE_CONFIG = { 'jobs.backoffBaseMs': 20, 'jobs.backoffCapMs': 1000 };

/**
 * msgd on a store of its own (keptStore) takes 12 SMS for a gateway at 5/s, sends the first two
 * and stops: a backlog waiting in line for the next msgd on that store.
 */
async function backlogThenStop() {
  const kept = await keptStore();
  const a = await startTestServer(LINE_CONFIG, { dataDir: kept.dataDir, env: kept.env });
  let made = false;
  try {
    const p = await setupPartner(a.ctx, { balance: '10' });
    await twilioGateway(a.ctx, p.partnerId, twilio, { rate_per_second: 5 });
    for (let i = 0; i < 12; i++)
      expect((await send(a.url, SMS, { to: '+14155550123', text: `old ${i}` }, p.token)).status).toBe(200);
    await waitFor(() => twilio.requests.length >= 2, 'the first two sent', 5_000);
    made = true;
    return { kept, p };
  } finally {
    await a.stop();
    if (!made) await kept.drop();
  }
}

let smtp: SmtpFake;
beforeAll(async () => {
  twilio = await startTwilioFake();
  smtp = await startSmtpFake();
  // Retries every <= 200 ms for up to 100 attempts: an outage of a few seconds is survivable.
  // The retries themselves are under test here, so the gateways' circuits never open (an open
  // circuit's messages wait without calls: test/e2e/failover.test.ts).
  s = await startTestServer({
    'dispatch.circuitBreaker.consecutiveFailures': 1000,
    'dispatch.circuitBreaker.failureRate': 0,
    'dispatch.timeoutMs': 1_000,
    'jobs.backoffBaseMs': 20,
    'jobs.backoffCapMs': 1000,
    'jobs.maxAttempts': 100,
  });
});
afterAll(async () => {
  await s?.stop();
  await twilio?.close();
  await smtp?.close();
});
beforeEach(() => {
  twilio.reset();
  smtp.reset();
});

async function burst(token: string, path: string, bodies: unknown[]) {
  const results = await Promise.all(bodies.map((b) => send(s.url, path, b, token)));
  expect(results.map((r) => r.status)).toEqual(bodies.map(() => 200));
  return results.map((r) => r.body.id as string);
}

describe('per-gateway rate shaping', () => {
  it('a gateway at 20 msg/s takes 40 messages in about 2 s, spaced, none refused', async () => {
    const p = await setupPartner(s.ctx, { balance: '10' });
    await twilioGateway(s.ctx, p.partnerId, twilio, { rate_per_second: 20 });
    const started = Date.now();
    const ids = await burst(
      p.token,
      SMS,
      Array.from({ length: 40 }, (_, i) => ({ to: '+14155550123', text: `shaped ${i}` })),
    );
    await waitFor(
      async () => (await messagesOf(s.ctx, p.partnerId)).every((m) => m.status === 'sent'),
      '40 sent',
      10_000,
    );
    expect(twilio.requests).toHaveLength(40);
    expect(twilio.requests.every((r) => r.reply?.status === 201)).toBe(true);
    const at = twilio.requests.map((r) => r.at).sort((a, b) => a - b);
    const gaps = at
      .slice(1)
      .map((t, i) => t - at[i])
      .join(',');
    // 40 slots 50 ms apart from the first: the last goes out about 1.95 s after the burst
    // (unshaped: ~0.1 s). The margin absorbs timer skew on a loaded 2-core machine.
    expect(at[39] - started, `gaps ${gaps}`).toBeGreaterThanOrEqual(1_750);
    expect(at[39] - started, `gaps ${gaps}`).toBeLessThan(6_000);
    // No one-second window holds much more than the rate. Slots are reserved up to 250 ms
    // ahead, so a stalled event loop (a busy 2-core machine) releases a few together: allow
    // half again the rate. Unshaped, all 40 land in one window.
    for (let i = 0; i < at.length; i++)
      expect(at.filter((t) => t >= at[i] && t < at[i] + 1000).length, `gaps ${gaps}`).toBeLessThanOrEqual(30);
    for (const id of ids)
      expect((await messagesOf(s.ctx, p.partnerId)).find((m) => m.id === id)!.error_code).toBeNull();
  });

  it('a backlog waiting for its slot shows queued, not sending, and all of it goes out', async () => {
    const p = await setupPartner(s.ctx, { balance: '10' });
    await twilioGateway(s.ctx, p.partnerId, twilio, { rate_per_second: 2 });
    const ids = await burst(
      p.token,
      SMS,
      Array.from({ length: 8 }, (_, i) => ({ to: '+14155550123', text: `slow ${i}` })),
    );
    const statusOf = async () => {
      const rows = await messagesOf(s.ctx, p.partnerId);
      return ids.map((id) => rows.find((m) => m.id === id)!.status);
    };
    // Every job has been claimed once and put back to wait for its slot (~0.5 s apart).
    await waitFor(async () => (await statusOf()).filter((st) => st === 'sent').length >= 2, 'the second sent', 5_000);
    const mid = await statusOf();
    expect(mid.filter((st) => st === 'queued').length, mid.join(',')).toBeGreaterThanOrEqual(4);
    // At most the message whose slot is due is in flight.
    expect(mid.filter((st) => st === 'sending').length, mid.join(',')).toBeLessThanOrEqual(1);
    await waitFor(async () => (await statusOf()).every((st) => st === 'sent'), '8 sent', 10_000);
    expect(twilio.requests).toHaveLength(8);
  });

  it('a deep backlog on a slow gateway waits in line: claimed about twice each (to take its place, then to go), never shown sending while it waits, sent in the order accepted', async () => {
    const p = await setupPartner(s.ctx, { balance: '10' });
    await twilioGateway(s.ctx, p.partnerId, twilio, { rate_per_second: 20 });
    const claimedBefore = s.rt.worker.counters.claimed;
    // One after another, so the order they were accepted in is known.
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const r = await send(s.url, SMS, { to: '+14155550123', text: `line ${i}` }, p.token);
      expect(r.status).toBe(200);
      ids.push(r.body.id);
    }
    let mostSending = 0;
    await waitFor(
      async () => {
        const msgs = await messagesOf(s.ctx, p.partnerId);
        mostSending = Math.max(mostSending, msgs.filter((m) => m.status === 'sending').length);
        return msgs.every((m) => m.status === 'sent');
      },
      '60 sent',
      15_000,
    );
    // 60 at 20/s is ~3 s. Each message is claimed to take its place in line, then to go. Before
    // the line, every waiting message was claimed (and marked 'sending') again at every slot:
    // 310 claims here, and up to 60 shown 'sending' at once.
    const claims = s.rt.worker.counters.claimed - claimedBefore;
    expect(claims, `${claims} claims`).toBeLessThanOrEqual(130);
    expect(mostSending).toBeLessThanOrEqual(6);
    // In the order accepted as msgd handed them over (sent_at): calls 50 ms apart on several
    // connections can reach the provider swapped when a loaded machine delays one on its way.
    const sentRows = await messagesOf(s.ctx, p.partnerId);
    const sentAt = ids.map((id) => sentRows.find((m) => m.id === id)!.sent_at!);
    for (let i = 1; i < sentAt.length; i++) expect(sentAt[i], `line ${i}`).toBeGreaterThan(sentAt[i - 1]);
    // Each once at the provider.
    expect(twilio.requests.map((r) => r.body.Body).sort()).toEqual(ids.map((_, i) => `line ${i}`).sort());
    for (const m of await messagesOf(s.ctx, p.partnerId)) expect(m.error_code).toBeNull();
  });

  it("raising a gateway's rate speeds up the messages already waiting in its line", async () => {
    const p = await setupPartner(s.ctx, { balance: '10' });
    const { gateway } = await twilioGateway(s.ctx, p.partnerId, twilio, { rate_per_second: 2 });
    await burst(
      p.token,
      SMS,
      Array.from({ length: 20 }, (_, i) => ({ to: '+14155550123', text: `raise ${i}` })),
    );
    await waitFor(() => twilio.requests.length >= 2, 'the first two sent', 5_000);
    // At 2/s the other 18 would take 9 s more; their places in line were counted at 2/s.
    await updateGateway(s.ctx, gateway.id, { settings: { rate_per_second: 100 } }, 'test');
    const changed = Date.now();
    await waitFor(
      async () => (await messagesOf(s.ctx, p.partnerId)).every((m) => m.status === 'sent'),
      '20 sent',
      10_000,
    );
    expect(Date.now() - changed).toBeLessThan(3_000);
    expect(twilio.requests).toHaveLength(20);
    expect(s.logs.some((l) => /rate changed to 100\/s: its waiting messages take new places in line/.test(l))).toBe(
      true,
    );
  });

  it('msgd restarted with a backlog in line: the backlog keeps its order and new messages wait behind it', async () => {
    const { kept, p } = await backlogThenStop();
    let b: TestServer | undefined;
    try {
      b = await startTestServer(LINE_CONFIG, { dataDir: kept.dataDir, env: kept.env });
      // Sent at once after the restart: without a line in memory they would take the free slots.
      for (let i = 0; i < 3; i++)
        expect((await send(b.url, SMS, { to: '+14155550123', text: `new ${i}` }, p.token)).status).toBe(200);
      await waitFor(
        async () => (await messagesOf(b!.ctx, p.partnerId)).every((m) => m.status === 'sent'),
        '15 sent',
        10_000,
      );
      const order = twilio.requests.map((r) => r.body.Body);
      expect(order).toEqual([...Array.from({ length: 12 }, (_, i) => `old ${i}`), 'new 0', 'new 1', 'new 2']);
      // SQLite's lines are in memory: a start wakes them. PostgreSQL keeps them in the database
      // (src/jobs/shared-lines.ts), so a start has nothing to wake there.
      expect(b.logs.some((l) => /msgd started: its waiting messages take new places in line/.test(l))).toBe(
        serverStore === 'sqlite',
      );
      expect((await messagesOf(b.ctx, p.partnerId)).filter((m) => m.dispatch_uncertain)).toEqual([]);
    } finally {
      await b?.stop();
      await kept.drop();
    }
  });

  it('msgd restarted after some places in line fell due: the backlog still goes in the order accepted', async () => {
    const { kept, p } = await backlogThenStop();
    let b: TestServer | undefined;
    try {
      // msgd comes back a second later (a slow start): the first places of the line, 200 ms
      // apart, are already due, the later ones are not. On PostgreSQL the places are on the
      // database's clock, which msgd's test clock does not move: the second passes there.
      const clock = testClock();
      if (serverStore === 'postgres') await sleep(1_000);
      else clock.advance(1_000);
      b = await startTestServer(LINE_CONFIG, { dataDir: kept.dataDir, env: kept.env, clock });
      await waitFor(
        async () => (await messagesOf(b!.ctx, p.partnerId)).every((m) => m.status === 'sent'),
        '12 sent',
        10_000,
      );
      expect(twilio.requests.map((r) => r.body.Body)).toEqual(Array.from({ length: 12 }, (_, i) => `old ${i}`));
    } finally {
      await b?.stop();
      await kept.drop();
    }
  });

  it('two gateways are shaped independently', async () => {
    const a = await setupPartner(s.ctx, { balance: '10' });
    const b = await setupPartner(s.ctx, { balance: '10' });
    await twilioGateway(s.ctx, a.partnerId, twilio, { rate_per_second: 10 });
    await twilioGateway(s.ctx, b.partnerId, twilio, { rate_per_second: 10 });
    const started = Date.now();
    await Promise.all([
      burst(
        a.token,
        SMS,
        Array.from({ length: 10 }, (_, i) => ({ to: '+14155550123', text: `a${i}` })),
      ),
      burst(
        b.token,
        SMS,
        Array.from({ length: 10 }, (_, i) => ({ to: '+14155550123', text: `b${i}` })),
      ),
    ]);
    await waitFor(
      async () =>
        [...(await messagesOf(s.ctx, a.partnerId)), ...(await messagesOf(s.ctx, b.partnerId))].every(
          (m) => m.status === 'sent',
        ),
      '20 sent',
      10_000,
    );
    // 10 each at 10/s side by side: about 0.9 s, not the 1.9 s one shared slot would take.
    expect(Date.now() - started).toBeLessThan(1_800);
    expect(twilio.requests).toHaveLength(20);
  });
});

describe('provider outage', () => {
  it('HTTP provider down for a while, then up: every message sent once, none failed, none lost', async () => {
    const p = await setupPartner(s.ctx, { balance: '10', prices: { sms: '0.01' } });
    await twilioGateway(s.ctx, p.partnerId, twilio);
    await twilio.down();
    let ids: string[];
    try {
      ids = await burst(
        p.token,
        SMS,
        Array.from({ length: 30 }, (_, i) => ({ to: '+14155550123', text: `outage ${i}` })),
      );
      // They are retrying: the refused connections are recorded, nothing is failed.
      await waitFor(
        async () =>
          (await messagesOf(s.ctx, p.partnerId)).filter((m) => m.error_code === 'network_error').length === 30,
        'every message to have hit the outage',
        5_000,
      );
      const jobsNow = () =>
        s.ctx.store.all<{ state: string; attempts: number }>(
          sql`SELECT state, attempts FROM jobs WHERE kind = 'message.dispatch' AND ${inList(s.ctx.store.dialect, jsonText(s.ctx.store.dialect, 'payload', 'message_id'), ids)}`,
        );
      // Each one is tried again, and again refused, while the provider stays down.
      await waitFor(
        async () => (await jobsNow()).filter((j) => j.attempts >= 3).length === 30,
        'every message to be retried during the outage',
        10_000,
      );
      const during = await messagesOf(s.ctx, p.partnerId);
      expect(during.every((m) => m.status === 'sending' || m.status === 'queued')).toBe(true);
      const jobs = await jobsNow();
      expect(jobs).toHaveLength(30);
      expect(jobs.every((j) => j.state !== 'dead')).toBe(true);
      expect(Math.max(...jobs.map((j) => j.attempts))).toBeGreaterThan(1);
    } finally {
      await twilio.up();
    }
    await waitFor(
      async () => (await messagesOf(s.ctx, p.partnerId)).every((m) => m.status === 'sent'),
      'all sent after the outage',
      10_000,
    );
    const msgs = await messagesOf(s.ctx, p.partnerId);
    expect(msgs).toHaveLength(30);
    expect(msgs.filter((m) => m.refunded)).toHaveLength(0);
    expect(msgs.every((m) => m.error_code === null)).toBe(true);
    const bodies = twilio.requests.map((r) => r.body.Body).sort();
    expect(bodies).toEqual(Array.from({ length: 30 }, (_, i) => `outage ${i}`).sort());
    expect(new Set(msgs.map((m) => m.provider_message_id)).size).toBe(30);
    await expectMoneyConsistent(s.ctx, p.partnerId);
  });

  it('SMTP relay down, then up: every mail delivered once', async () => {
    const p = await setupPartner(s.ctx, { balance: '10', prices: { email: '0.001' } });
    await smtpGateway(s.ctx, p.partnerId, smtp);
    await smtp.down();
    try {
      await burst(
        p.token,
        EMAIL,
        Array.from({ length: 10 }, (_, i) => ({
          to: `user${i}@example.com`,
          subject: `outage ${i}`,
          html: '<p>x</p>',
        })),
      );
      await waitFor(
        async () =>
          (await messagesOf(s.ctx, p.partnerId)).filter((m) => m.error_code === 'network_error').length === 10,
        'every mail to have hit the outage',
        5_000,
      );
    } finally {
      await smtp.up();
    }
    await waitFor(
      async () => (await messagesOf(s.ctx, p.partnerId)).every((m) => m.status === 'sent'),
      'all delivered after the outage',
      10_000,
    );
    expect(smtp.messages.map((m) => m.subject).sort()).toEqual(
      Array.from({ length: 10 }, (_, i) => `outage ${i}`).sort(),
    );
    await expectMoneyConsistent(s.ctx, p.partnerId);
  });
});

describe('a paused gateway, enabled again', () => {
  let slow: TestServer;
  beforeAll(async () => {
    // The default backoff cap: a paused message looks again every 15-20 s.
    slow = await startTestServer({ 'dispatch.timeoutMs': 1_000 });
  });
  afterAll(async () => {
    await slow?.stop();
  });

  it('a line that fell behind (the event loop stalled) catches up at the rate, not in a burst', async () => {
    const p = await setupPartner(slow.ctx, { balance: '10' });
    await twilioGateway(slow.ctx, p.partnerId, twilio, { rate_per_second: 2 });
    for (let i = 0; i < 10; i++)
      expect((await send(slow.url, SMS, { to: '+14155550123', text: `stall ${i}` }, p.token)).status).toBe(200);
    await waitFor(() => twilio.requests.length >= 1, 'the first sent', 5_000);
    // A 3 s stall (a long GC, a slow disk): six places pass meanwhile.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3_000);
    await waitFor(
      async () => (await messagesOf(slow.ctx, p.partnerId)).every((m) => m.status === 'sent'),
      '10 sent',
      15_000,
    );
    // When msgd handed each over (sent_at), in the order accepted: the fake's arrival times add
    // the way there, and the first call's new connection is slow on a busy machine.
    const at = (await messagesOf(slow.ctx, p.partnerId))
      .sort((a, b) => a.created_at - b.created_at || a.id.localeCompare(b.id))
      .map((m) => m.sent_at!);
    const gaps = at.slice(1).map((t, i) => t - at[i]);
    // 500 ms apart at 2/s; timers on a busy machine fire a little early or late.
    expect(Math.min(...gaps), gaps.join(',')).toBeGreaterThanOrEqual(350);
    expect(twilio.requests.map((r) => r.body.Body)).toEqual(Array.from({ length: 10 }, (_, i) => `stall ${i}`));
  });

  it('a gateway removed with messages in its line fails and refunds them at once, not at their places', async () => {
    const p = await setupPartner(slow.ctx, { balance: '10', prices: { sms: '0.01' } });
    const { gateway, channel } = await twilioGateway(slow.ctx, p.partnerId, twilio, { rate_per_second: 1 });
    for (let i = 0; i < 8; i++)
      expect((await send(slow.url, SMS, { to: '+14155550123', text: `gone ${i}` }, p.token)).status).toBe(200);
    await waitFor(() => twilio.requests.length >= 1, 'the first sent', 5_000);
    await unassignChannel(slow.ctx, { channel: channel.id }, 'test');
    await removeGateway(slow.ctx, gateway.id, 'test');
    const removed = Date.now();
    await waitFor(
      async () => (await messagesOf(slow.ctx, p.partnerId)).every((m) => m.status === 'sent' || m.status === 'failed'),
      'all settled',
      10_000,
    );
    // At 1/s their places were up to 7 s away.
    expect(Date.now() - removed).toBeLessThan(3_000);
    const failed = (await messagesOf(slow.ctx, p.partnerId)).filter((m) => m.status === 'failed');
    expect(failed.length).toBeGreaterThanOrEqual(6);
    for (const m of failed)
      expect({ code: m.error_code, refunded: m.refunded }).toEqual({ code: 'gateway_removed', refunded: 1 });
    await expectMoneyConsistent(slow.ctx, p.partnerId);
  });

  it('sends its waiting messages at once, in the order they were accepted, not at their next recheck', async () => {
    const p = await setupPartner(slow.ctx, { balance: '10' });
    const { gateway, channel } = await twilioGateway(slow.ctx, p.partnerId, twilio, { rate_per_second: 20 });
    await updateGateway(slow.ctx, gateway.id, { status: 'disabled' }, 'test');
    // Accepted before the gateway was disabled (the API refuses new sends on it meanwhile):
    // what the accept transaction writes, a message and its dispatch job.
    const ids = await slow.ctx.store.transaction(async (tx) => {
      const made: string[] = [];
      for (let i = 0; i < 10; i++) {
        const id = await storeOutboundSmsIn(
          tx,
          slow.ctx,
          p.partnerId,
          { id: channel.id, gateway_id: gateway.id, sender: channel.sender },
          { text: `paused ${i}` },
        );
        await slow.rt.queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: id } });
        made.push(id);
      }
      return made;
    });
    await waitFor(
      async () => (await messagesOf(slow.ctx, p.partnerId)).every((m) => m.error_code === 'gateway_disabled'),
      'every message paused',
      5_000,
    );
    expect(twilio.requests).toHaveLength(0);
    await updateGateway(slow.ctx, gateway.id, { status: 'active' }, 'test');
    const enabled = Date.now();
    await waitFor(
      async () => (await messagesOf(slow.ctx, p.partnerId)).every((m) => m.status === 'sent'),
      '10 sent',
      10_000,
    );
    // Their rechecks were 15-20 s away.
    expect(Date.now() - enabled).toBeLessThan(4_000);
    expect(twilio.requests.map((r) => r.body.Body)).toEqual(ids.map((_, i) => `paused ${i}`));
  });
});
