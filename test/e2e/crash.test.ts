import { Pool } from 'undici';
import { describe, expect, it } from 'vitest';
import { parseMoney } from '../../src/lib/money.js';
import { startTwilioFake } from '../fakes/twilio.js';
import { waitFor, waitForExit } from '../helpers/wait.js';
import { cleanupAfterEach, inspect, prepare, startMsgd } from './child.js';
import { SMS, twilioGateway } from '../helpers/gateways.js';
import { setupPartner } from '../helpers/server.js';
import { balanceOf, messagesOf } from '../helpers/rows.js';
import { expectMoneyConsistent } from '../helpers/expectations.js';
import { unassignChannel } from '../../src/core/channels.js';
import { removeGateway } from '../../src/core/gateways.js';

// kill -9 in the middle of a load, then start again: nothing that got a 200 is lost, no
// money moves without its message, every message reaches the provider, and a message whose
// provider call was in flight at the crash is flagged when it may have gone twice.

const CONFIG = {
  jobs: { leaseSeconds: 5, lifelineIntervalSeconds: 1, backoffBaseMs: 50, backoffCapMs: 1000, concurrency: 64 },
  dispatch: { timeoutMs: 5000 },
};

const cleanup = cleanupAfterEach();

describe('crash: kill -9 mid-load, restart', () => {
  it('every 200 survives, debits match messages, each message is sent (twice only if flagged)', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    fake.latencyMs = 300;
    const price = '0.01';
    const prep = cleanup.prep(await prepare(fake, CONFIG, { balance: '1000', price }));
    const first = await startMsgd(prep);
    cleanup.child(first);

    // 32 clients sending back to back until the process dies under them.
    const pool = new Pool(first.url, { connections: 32, pipelining: 1 });
    const accepted = new Set<string>();
    const statuses: Record<string, number> = {};
    let sent = 0;
    let failedRequests = 0;
    const load = Promise.all(
      Array.from({ length: 32 }, async () => {
        while (sent < 5000) {
          const i = sent++;
          try {
            const res = await pool.request({
              path: SMS,
              method: 'POST',
              headers: { 'content-type': 'application/json', authorization: `Bearer ${prep.partner.token}` },
              body: JSON.stringify({ to: '+14155550123', text: `crash ${i}` }),
            });
            const body = (await res.body.json()) as any;
            statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
            if (res.statusCode === 200) accepted.add(body.id);
          } catch {
            failedRequests++;
            return;
          }
        }
      }),
    );

    // Kill once some messages are settled, others are at the provider (the fake holds each
    // call 300 ms) and sends are still arriving. Calls go out in waves, a batch at a time, so
    // there are moments just after a wave's answers with nothing at the provider: not those.
    await waitFor(
      () =>
        fake.requests.filter((r) => r.reply !== undefined).length >= 40 &&
        accepted.size >= 200 &&
        fake.requests.some((r) => r.reply === undefined),
      'load to be under way',
      15_000,
    );
    const inFlightAtKill = fake.requests.filter((r) => r.reply === undefined).length;
    first.child.kill('SIGKILL');
    const exit = await waitForExit(first.child);
    expect(exit.signal).toBe('SIGKILL');
    await load;
    await pool.destroy();
    expect(inFlightAtKill).toBeGreaterThan(0);
    // Everything answered was a 200 (funds are ample); requests open at the kill died with it.
    expect(Object.keys(statuses)).toEqual(['200']);
    expect(failedRequests).toBeGreaterThan(0);
    expect(sent).toBeLessThan(5000);

    // Right after the crash: every 200 is on disk with its debit, and no debit lacks a message.
    let view = await inspect(prep);
    try {
      const rows = await messagesOf(view.ctx, prep.partner.partnerId);
      const ids = new Set(rows.map((m) => m.id));
      for (const id of accepted) expect(ids.has(id), `accepted ${id} is missing after the crash`).toBe(true);
      await expectMoneyConsistent(view.ctx, prep.partner.partnerId);
      expect(rows.some((m) => m.status === 'queued' || m.status === 'sending')).toBe(true);
    } finally {
      await view.close();
    }

    const second = await startMsgd(prep);
    cleanup.child(second);
    view = await inspect(prep);
    try {
      // The lease of the killed process's jobs (5 s) must pass before they are taken back.
      await waitFor(
        async () => (await messagesOf(view.ctx, prep.partner.partnerId)).every((m) => m.status === 'sent'),
        'every message to be sent after the restart',
        25_000,
        100,
      );
      const rows = await messagesOf(view.ctx, prep.partner.partnerId);
      for (const id of accepted) expect(rows.some((m) => m.id === id)).toBe(true);

      // Provider calls per message: at least one; more than one only when flagged uncertain.
      const calls = new Map<string, number>();
      for (const r of fake.requests) calls.set(r.body.Body, (calls.get(r.body.Body) ?? 0) + 1);
      const flagged = rows.filter((m) => m.dispatch_uncertain === 1);
      for (const m of rows) {
        const n = calls.get(JSON.parse(m.content).text) ?? 0;
        expect(n, `provider calls for ${m.id}`).toBeGreaterThanOrEqual(1);
        if (n > 1) expect(m.dispatch_uncertain, `${m.id} went ${n} times unflagged`).toBe(1);
      }
      // Nothing reaches the provider that msgd did not accept.
      const texts = new Set(rows.map((m) => JSON.parse(m.content).text));
      for (const t of calls.keys()) expect(texts.has(t)).toBe(true);
      // The calls in flight at the kill were flagged, and only jobs that were running are.
      expect(rows.length).toBeGreaterThanOrEqual(accepted.size);
      expect(flagged.length).toBeGreaterThanOrEqual(1);
      expect(flagged.length).toBeLessThanOrEqual(CONFIG.jobs.concurrency);

      await expectMoneyConsistent(view.ctx, prep.partner.partnerId);
      expect(rows.filter((m) => m.refunded)).toHaveLength(0);
      expect(await balanceOf(view.ctx, prep.partner.partnerId)).toBe(
        parseMoney('1000') - rows.length * parseMoney(price),
      );
      const jobs = view.ctx.db.sqlite
        .prepare(`SELECT COUNT(*) AS n FROM jobs WHERE kind = 'message.dispatch'`)
        .get() as { n: number };
      expect(jobs.n).toBe(0);
    } finally {
      await view.close();
    }

    second.child.kill('SIGTERM');
    expect((await waitForExit(second.child, 15_000)).code).toBe(0);
  }, 90_000);

  it('flags only the messages whose request may have left: not those waiting for a free connection', async () => {
    // 64 calls at a time, 4 connections to the provider, which holds each call: 4 requests on
    // the wire, 60 claimed calls waiting for a connection, the rest of the backlog queued.
    const config = {
      jobs: { leaseSeconds: 5, lifelineIntervalSeconds: 1, concurrency: 64 },
      dispatch: { timeoutMs: 60_000, connectionsPerOrigin: 4 },
    };
    const fake = cleanup.fake(await startTwilioFake());
    fake.latencyMs = 30_000;
    const prep = cleanup.prep(await prepare(fake, config, { balance: '1000', price: '0.01' }));
    const first = cleanup.child(await startMsgd(prep));
    const pool = new Pool(first.url, { connections: 8, pipelining: 1 });
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) {
      const res = await pool.request({
        path: SMS,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${prep.partner.token}` },
        body: JSON.stringify({ to: '+14155550123', text: `backlog ${i}` }),
      });
      expect(res.statusCode).toBe(200);
      ids.push(((await res.body.json()) as { id: string }).id);
    }
    await pool.close();
    let view = await inspect(prep);
    try {
      await waitFor(
        async () =>
          fake.requests.length === 4 &&
          (await messagesOf(view.ctx, prep.partner.partnerId)).filter((m) => m.status === 'sending').length === 64,
        '4 calls on the wire and 64 claimed',
        15_000,
      );
    } finally {
      await view.close();
    }
    const onTheWire = new Set(fake.requests.map((r) => r.body.Body as string));
    first.child.kill('SIGKILL');
    expect((await waitForExit(first.child)).signal).toBe('SIGKILL');
    expect(fake.requests).toHaveLength(4);

    fake.latencyMs = 0;
    const second = cleanup.child(await startMsgd(prep));
    view = await inspect(prep);
    try {
      await waitFor(
        async () => (await messagesOf(view.ctx, prep.partner.partnerId)).every((m) => m.status === 'sent'),
        'every message to be sent after the restart',
        30_000,
        100,
      );
      const rows = await messagesOf(view.ctx, prep.partner.partnerId);
      expect(rows.map((m) => m.id).sort()).toEqual([...ids].sort());
      const calls = new Map<string, number>();
      for (const r of fake.requests) calls.set(r.body.Body, (calls.get(r.body.Body) ?? 0) + 1);
      const flagged = new Set(rows.filter((m) => m.dispatch_uncertain === 1).map((m) => JSON.parse(m.content).text));
      // Every provider-side duplicate is flagged, and only the 4 calls that were on the wire are.
      for (const [text, n] of calls)
        if (n > 1) expect(flagged.has(text), `${text} went ${n} times unflagged`).toBe(true);
      expect([...flagged].sort()).toEqual([...onTheWire].sort());
      expect([...calls.values()].filter((n) => n > 1)).toHaveLength(4);
      expect(rows.every((m) => m.dispatch_in_flight === 0)).toBe(true);
      await expectMoneyConsistent(view.ctx, prep.partner.partnerId);
    } finally {
      await view.close();
    }
    second.child.kill('SIGTERM');
    expect((await waitForExit(second.child, 15_000)).code).toBe(0);
  }, 90_000);

  it('a call on the wire at the crash whose gateway is then removed fails flagged, not as never sent', async () => {
    const fake = cleanup.fake(await startTwilioFake());
    fake.latencyMs = 30_000;
    const prep = cleanup.prep(await prepare(fake, CONFIG, { balance: '10', price: '0.01' }));
    const first = cleanup.child(await startMsgd(prep));
    const res = await fetch(`${first.url}${SMS}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${prep.partner.token}` },
      body: JSON.stringify({ to: '+14155550123', text: 'on the wire' }),
    });
    expect(res.status).toBe(200);
    const { id } = (await res.json()) as { id: string };
    await waitFor(() => fake.requests.length === 1, 'the call to reach the provider', 15_000);
    first.child.kill('SIGKILL');
    expect((await waitForExit(first.child)).signal).toBe('SIGKILL');

    // The operator retires the gateway before starting msgd again.
    let view = await inspect(prep);
    try {
      const m = (await messagesOf(view.ctx, prep.partner.partnerId)).find((r) => r.id === id)!;
      await unassignChannel(view.ctx, { channel: m.channel_id! }, 'test');
      await removeGateway(view.ctx, m.gateway_id!, 'test');
    } finally {
      await view.close();
    }
    fake.latencyMs = 0;
    const second = cleanup.child(await startMsgd(prep));
    view = await inspect(prep);
    try {
      await waitFor(
        async () => (await messagesOf(view.ctx, prep.partner.partnerId)).every((m) => m.status === 'failed'),
        'the message to fail',
        15_000,
        100,
      );
      const [m] = await messagesOf(view.ctx, prep.partner.partnerId);
      // The provider may have taken it: refunded, but flagged, so a delivery report charges it again.
      expect(m.error_code).toBe('gateway_removed');
      expect(m.dispatch_uncertain).toBe(1);
      expect(fake.requests).toHaveLength(1);
      await expectMoneyConsistent(view.ctx, prep.partner.partnerId);
    } finally {
      await view.close();
    }
    second.child.kill('SIGTERM');
    expect((await waitForExit(second.child, 15_000)).code).toBe(0);
  }, 60_000);

  it('counts the calls of every gateway on one provider origin against its connections', async () => {
    // One connection to the provider, two gateways calling it (their base_url written two ways):
    // while the first call holds the connection, the second waits in msgd, known not sent.
    const fake = cleanup.fake(await startTwilioFake());
    fake.latencyMs = 30_000;
    const prep = cleanup.prep(
      await prepare(
        fake,
        { ...CONFIG, dispatch: { timeoutMs: 60_000, connectionsPerOrigin: 1 } },
        {
          balance: '10',
          price: '0.01',
        },
      ),
    );
    let view = await inspect(prep);
    let other: { token: string; partnerId: string };
    try {
      other = await setupPartner(view.ctx, { balance: '10', prices: { sms: '0.01' }, rateLimitPerMinute: 1_000_000 });
      await twilioGateway(view.ctx, other.partnerId, fake, { base_url: `${fake.url}/` });
    } finally {
      await view.close();
    }
    const first = cleanup.child(await startMsgd(prep));
    const send = async (token: string, text: string) => {
      const res = await fetch(`${first.url}${SMS}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ to: '+14155550123', text }),
      });
      expect(res.status).toBe(200);
    };
    await send(prep.partner.token, 'on the wire');
    await waitFor(() => fake.requests.length === 1, 'the first call to reach the provider', 15_000);
    await send(other.token, 'waiting for the connection');
    view = await inspect(prep);
    try {
      await waitFor(
        async () => (await messagesOf(view.ctx, other.partnerId)).some((m) => m.status === 'sending'),
        'the second call to be claimed',
        15_000,
      );
      await new Promise((r) => setTimeout(r, 500));
      expect((await messagesOf(view.ctx, other.partnerId))[0].dispatch_in_flight).toBe(0);
    } finally {
      await view.close();
    }
    first.child.kill('SIGKILL');
    expect((await waitForExit(first.child)).signal).toBe('SIGKILL');
    expect(fake.requests).toHaveLength(1);

    fake.latencyMs = 0;
    const second = cleanup.child(await startMsgd(prep));
    view = await inspect(prep);
    try {
      const all = async () => [
        ...(await messagesOf(view.ctx, prep.partner.partnerId)),
        ...(await messagesOf(view.ctx, other.partnerId)),
      ];
      await waitFor(
        async () => (await all()).every((m) => m.status === 'sent'),
        'both messages to be sent',
        15_000,
        100,
      );
      const flagged = (await all()).filter((m) => m.dispatch_uncertain === 1).map((m) => JSON.parse(m.content).text);
      expect(flagged).toEqual(['on the wire']);
    } finally {
      await view.close();
    }
    second.child.kill('SIGTERM');
    expect((await waitForExit(second.child, 15_000)).code).toBe(0);
  }, 60_000);
});
