import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CoreCtx } from '../../src/core/context.js';
import { emitEventIn } from '../../src/core/events.js';
import { sql } from '../../src/db/sql.js';
import { runCli } from '../helpers/cli.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, startReceiver, type Receiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import { apiFor, outOverrides, type Api } from '../webhooks-out/helpers.js';
import { migratedDatabase } from './helpers.js';

// Outbound webhooks with msgd on PostgreSQL, as a partner sees them: msgd started on the
// database (startServer), an endpoint at a real HTTPS receiver that verifies every request as
// the docs tell partners to, a message sent through /v1 and its event arriving signed; a 500
// retried with the same event id; an endpoint disabled by its failure rule; two msgd on one
// database delivering each event once; msgctl's replay on the database.

const KEY = randomBytes(32).toString('hex');
const db = migratedDatabase();
let tls: TlsFiles;
beforeAll(() => {
  tls = makeCert();
});
afterAll(() => tls.cleanup());

const env = () => ({ MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY });

/** msgd on the file's database, trusting the receiver's certificate. */
const startPg = (extra: Record<string, unknown> = {}) => startTestServer(outOverrides(tls, extra), { env: env() });

interface Delivery {
  id: string;
  event_id: string;
  endpoint_id: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
}

const deliveryOf = (ctx: CoreCtx, endpointId: string, eventId: string) =>
  ctx.store.get<Delivery>(
    sql`SELECT id, event_id, endpoint_id, status, attempts, last_status_code FROM webhook_deliveries
         WHERE endpoint_id = ${endpointId} AND event_id = ${eventId}`,
  );

const attemptCodes = async (ctx: CoreCtx, deliveryId: string) =>
  (
    await ctx.store.all<{ status_code: number | null }>(
      sql`SELECT status_code FROM webhook_attempts WHERE delivery_id = ${deliveryId} ORDER BY attempt_no`,
    )
  ).map((a) => a.status_code);

const endpointOf = (ctx: CoreCtx, id: string) =>
  ctx.store.get<{ status: string; disabled_reason: string | null; failing_since: number | null }>(
    sql`SELECT status, disabled_reason, failing_since FROM webhook_endpoints WHERE id = ${id}`,
  );

async function settled(ctx: CoreCtx, endpointId: string, eventId: string, status: string, timeoutMs = 10_000) {
  return waitFor(
    async () => {
      const d = await deliveryOf(ctx, endpointId, eventId);
      return d?.status === status ? d : undefined;
    },
    `the delivery of ${eventId} ${status}`,
    timeoutMs,
  );
}

let senders = 1000;

/** A partner with funds, a sandbox SMS channel, a token, and the receiver registered as its endpoint. */
async function partnerWithEndpoint(server: TestServer, receiver: Receiver, events?: string[]) {
  const partner = await setupPartner(server.ctx, { balance: '100', prices: { sms: '0.01' } });
  // A sender of its own: the file's partners share the database.
  await connect(server.ctx, partner.partnerId, { kind: 'sandbox' }, 'sms', `+1555000${++senders}`.padEnd(12, '0'));
  const api = apiFor(server, partner.token);
  const r = await api('POST', '/v1/webhooks', { url: receiver.url, ...(events ? { events } : {}) });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  receiver.setSecrets([r.body.secret]);
  return { partner, api, endpoint: { id: r.body.id as string, secret: r.body.secret as string } };
}

const sendSms = async (api: Api, text: string) => {
  const r = await api('POST', '/v1/messages', { channel: 'sms', to: '+14155550111', body: text });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.id as string;
};

describe('webhooks out on PostgreSQL', () => {
  let server: TestServer;
  let receiver: Receiver;
  let api: Api;
  let endpoint: { id: string; secret: string };
  beforeAll(async () => {
    server = await startPg();
    receiver = await startReceiver(tls);
    ({ api, endpoint } = await partnerWithEndpoint(server, receiver));
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.stop();
  });

  it('runs on PostgreSQL: not among the parts msgd leaves out there', () => {
    expect(server.rt.opened.dialect).toBe('postgres');
    expect(server.rt.sqliteOnly).not.toContain('webhooksOut');
    expect(server.logs.join('')).not.toContain('webhooks out: fan-out and delivery');
  });

  it('a message sent through /v1 reaches the endpoint as a signed message.sent event', async () => {
    const messageId = await sendSms(api, 'hello from postgres');
    const got = await waitFor(
      () => receiver.received.find((r) => r.body?.event === 'message.sent' && r.body.message_id === messageId),
      'message.sent at the receiver',
      10_000,
    );
    // Verified as a partner does: Standard Webhooks over the raw body with the secret it was given.
    expect(() =>
      new Webhook(endpoint.secret).verify(got.raw.toString('utf8'), {
        'webhook-id': got.headers['webhook-id'],
        'webhook-timestamp': got.headers['webhook-timestamp'],
        'webhook-signature': got.headers['webhook-signature'],
      }),
    ).not.toThrow();
    expect(() =>
      new Webhook(`whsec_${Buffer.from('some other secret').toString('base64')}`).verify(got.raw.toString('utf8'), {
        'webhook-id': got.headers['webhook-id'],
        'webhook-timestamp': got.headers['webhook-timestamp'],
        'webhook-signature': got.headers['webhook-signature'],
      }),
    ).toThrow();
    expect(got.verified).toBe(true);
    expect(got.headers['webhook-id']).toBe(got.body.id);
    expect(got.headers['x-msgd-event-id']).toBe(got.body.id);
    expect(got.body).toMatchObject({ event: 'message.sent', channel: 'sms', to: '+14155550111', status: 'sent' });
    const d = await settled(server.ctx, endpoint.id, got.body.id, 'succeeded');
    expect(d).toMatchObject({ attempts: 1, last_status_code: 200 });
    expect(await attemptCodes(server.ctx, d.id)).toEqual([200]);
  });

  it('a 500 is retried with the same event id until the endpoint takes it', async () => {
    let failures = 0;
    receiver.behave((r) =>
      r.body?.event === 'message.sent' && failures++ < 2
        ? { kind: 'status', status: 500, body: 'database down' }
        : { kind: 'ok' },
    );
    try {
      const messageId = await sendSms(api, 'retry me');
      // Its message.sent (the sandbox's delivery report adds a message.delivered of its own).
      const sent = (r: { body?: Record<string, unknown> | null }) =>
        r.body?.message_id === messageId && r.body?.event === 'message.sent';
      const first = await waitFor(() => receiver.received.find(sent), 'the first attempt', 10_000);
      const eventId = first.body.id as string;
      const d = await settled(server.ctx, endpoint.id, eventId, 'succeeded');
      expect(await attemptCodes(server.ctx, d.id)).toEqual([500, 500, 200]);
      const tries = receiver.received.filter(sent);
      expect(tries).toHaveLength(3);
      expect(new Set(tries.map((r) => r.headers['webhook-id']))).toEqual(new Set([eventId]));
      expect(tries.every((r) => r.verified)).toBe(true);
      expect(receiver.delivered.filter((id) => id === eventId)).toHaveLength(1);
      expect((await endpointOf(server.ctx, endpoint.id))?.failing_since).toBeNull();
    } finally {
      receiver.behave({ kind: 'ok' });
    }
  });

  it('msgctl webhooks replay --json on the database: the event is sent again with its id', async () => {
    const messageId = await sendSms(api, 'replay me');
    const got = await waitFor(
      () => receiver.received.find((r) => r.body?.event === 'message.sent' && r.body.message_id === messageId),
      'message.sent',
      10_000,
    );
    const eventId = got.body.id as string;
    const d = await settled(server.ctx, endpoint.id, eventId, 'succeeded');
    const r = await runCli(['webhooks', 'replay', eventId, '--json'], { env: env() });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).queued).toEqual([
      { event_id: eventId, endpoint_id: endpoint.id, delivery_id: d.id, kind: 'restarted' },
    ]);
    await waitFor(() => receiver.seen.get(eventId) === 2, 'the replayed event at the receiver', 10_000);
    expect(receiver.received.filter((x) => x.id === eventId).every((x) => x.verified)).toBe(true);
    expect(receiver.delivered.filter((id) => id === eventId)).toHaveLength(1);
    const again = await waitFor(
      async () => {
        const x = await deliveryOf(server.ctx, endpoint.id, eventId);
        return x?.status === 'succeeded' && x.attempts === 2 ? x : undefined;
      },
      'the replay settled',
      10_000,
    );
    expect(await attemptCodes(server.ctx, again.id)).toEqual([200, 200]);
  });
});

describe('the failure rule on PostgreSQL', () => {
  it('an endpoint failing continuously for disableAfterHours is disabled, gets nothing more, and msgctl enables it and replays', async () => {
    // 1.8 s of failing, a schedule that outlasts it: the rule, not the schedule, ends the delivery.
    const server = await startPg({
      'webhooksOut.disableAfterHours': 0.0005,
      'webhooksOut.retryScheduleMs': Array.from({ length: 40 }, (_, i) => (i === 0 ? 0 : 200)),
    });
    const receiver = await startReceiver(tls);
    try {
      // message.sent only: the sandbox's delivery report would add a second event, delivered or
      // failed on its own schedule.
      const { api, endpoint } = await partnerWithEndpoint(server, receiver, ['message.sent']);
      receiver.behave({ kind: 'status', status: 500 });
      const messageId = await sendSms(api, 'doomed');
      const first = await waitFor(
        () => receiver.received.find((r) => r.body?.message_id === messageId),
        'the first attempt',
        10_000,
      );
      const eventId = first.body.id as string;
      const ep = await waitFor(
        async () => {
          const e = await endpointOf(server.ctx, endpoint.id);
          return e?.status === 'disabled' ? e : undefined;
        },
        'the endpoint disabled',
        15_000,
      );
      expect(ep.disabled_reason).toMatch(/^failing continuously since .* last error: HTTP 500$/);
      const d = await settled(server.ctx, endpoint.id, eventId, 'failed');
      const codes = await attemptCodes(server.ctx, d.id);
      expect(codes.length).toBeGreaterThan(2);
      expect(codes.every((c) => c === 500)).toBe(true);
      expect(new Set(receiver.received.map((r) => r.headers['webhook-id']))).toEqual(new Set([eventId]));
      // Disabled: the partner sees it, and a new event is not queued for it.
      const listed = await api('GET', `/v1/webhooks/${endpoint.id}`);
      expect(listed.body).toMatchObject({ status: 'disabled', disabled_reason: ep.disabled_reason });
      const count = receiver.received.length;
      receiver.behave({ kind: 'ok' });
      const later = await sendSms(api, 'after the disable');
      await waitFor(
        async () =>
          (await server.ctx.store.get<{ status: string }>(sql`SELECT status FROM messages WHERE id = ${later}`))
            ?.status === 'sent',
        'the later message sent',
        10_000,
      );
      await new Promise((r) => setTimeout(r, 1500));
      expect(receiver.received.length).toBe(count);
      const deliveries = await server.ctx.store.all<{ id: string }>(
        sql`SELECT id FROM webhook_deliveries WHERE endpoint_id = ${endpoint.id}`,
      );
      expect(deliveries).toHaveLength(1);

      // The operator, with msgctl on the database: sees why, enables it, sends it what failed.
      const cli = async (args: string[]) => {
        const r = await runCli([...args, '--json'], { env: env() });
        expect(r.code, r.stderr).toBe(0);
        return JSON.parse(r.stdout);
      };
      const listedOp = (await cli(['webhooks', 'endpoints'])).data.find((e: { id: string }) => e.id === endpoint.id);
      expect(listedOp).toMatchObject({ status: 'disabled', disabled_reason: ep.disabled_reason });
      const failed = await cli(['webhooks', 'deliveries', '--endpoint', endpoint.id, '--failed']);
      expect(failed.data.map((x: { event_id: string }) => x.event_id)).toEqual([eventId]);
      expect(await cli(['webhooks', 'enable', endpoint.id])).toMatchObject({ id: endpoint.id, status: 'enabled' });
      const replayed = await cli(['webhooks', 'replay', '--since', '1h', '--endpoint', endpoint.id]);
      expect(replayed.queued.map((q: { event_id: string }) => q.event_id)).toContain(eventId);
      await waitFor(() => receiver.delivered.includes(eventId), 'the failed event delivered after the enable', 10_000);
      await settled(server.ctx, endpoint.id, eventId, 'succeeded');
    } finally {
      await receiver.close();
      await server.stop();
    }
  });
});

describe('two msgd on one PostgreSQL', () => {
  it('fan out and deliver each event once per endpoint, both taking part', async () => {
    // A loaded machine may be slow to answer: a timeout is an at-least-once retry, not the point
    // here. 16 requests at a time per msgd, 100 ms each: one msgd alone would take seconds, so the
    // other's worker, polling every second, claims its share.
    const out = { 'webhooksOut.timeoutMs': 10_000, 'webhooksOut.concurrency': 16 };
    const a = await startPg(out);
    const b = await startPg(out);
    const receiver = await startReceiver(tls);
    receiver.behave({ kind: 'slow', ms: 100 });
    try {
      const { partner, endpoint } = await partnerWithEndpoint(a, receiver);
      // A second endpoint of the same partner: each event goes to both, once each.
      const second = await apiFor(b, partner.token)('POST', '/v1/webhooks', { url: `${receiver.url}/second` });
      expect(second.status).toBe(201);
      const secrets = { [endpoint.id]: endpoint.secret, [second.body.id as string]: second.body.secret as string };
      receiver.setSecrets(Object.values(secrets));
      const N = 150;
      const ids: string[] = [];
      // Events written on both instances, in bursts, as their requests would.
      for (let i = 0; i < N; i += 10) {
        const on = (i / 10) % 2 === 0 ? a : b;
        const burst = await on.ctx.store.transaction(async (tx) => {
          const out: string[] = [];
          for (let j = i; j < Math.min(N, i + 10); j++)
            out.push((await emitEventIn(tx, on.ctx, partner.partnerId, 'message.sent', { message_id: `m${j}` })).id);
          return out;
        });
        ids.push(...burst);
        await new Promise((r) => setTimeout(r, 20));
      }
      const endpoints = Object.keys(secrets).sort();
      const deliveries = () =>
        a.ctx.store.all<{ id: string; event_id: string; endpoint_id: string; status: string; attempts: number }>(
          sql`SELECT id, event_id, endpoint_id, status, attempts FROM webhook_deliveries
               WHERE endpoint_id IN (${endpoints[0]}, ${endpoints[1]}) ORDER BY event_id, endpoint_id`,
        );
      const done = await waitFor(
        async () => {
          const ds = await deliveries();
          return ds.length === 2 * N && ds.every((d) => d.status === 'succeeded') ? ds : undefined;
        },
        `${2 * N} deliveries succeeded`,
        60_000,
      );
      // One delivery per event and endpoint, and every event at both endpoints.
      expect(done.map((d) => `${d.event_id} ${d.endpoint_id}`)).toEqual(
        [...ids].sort().flatMap((id) => endpoints.map((e) => `${id} ${e}`)),
      );
      expect(receiver.received.every((r) => r.verified)).toBe(true);
      expect([...receiver.delivered].sort()).toEqual([...ids].sort());
      // Which endpoint each request was for: the secret that signed it.
      const endpointOfRequest = (raw: Buffer, header: string) =>
        endpoints.find((e) => header === `sha256=${createHmac('sha256', secrets[e]).update(raw).digest('hex')}`);
      const arrivals = new Map<string, number>();
      for (const r of receiver.received) {
        const key = `${r.id} ${endpointOfRequest(r.raw, r.headers['x-msgd-signature'])}`;
        arrivals.set(key, (arrivals.get(key) ?? 0) + 1);
      }
      // Each delivery arrived, and never more often than it was attempted: no attempt was made by
      // both instances (a second arrival is only a retry, after a timeout, with the same id).
      for (const d of done) {
        const n = arrivals.get(`${d.event_id} ${d.endpoint_id}`) ?? 0;
        expect(n, `${d.event_id} at ${d.endpoint_id}`).toBeGreaterThanOrEqual(1);
        expect(n, `${d.event_id} at ${d.endpoint_id}`).toBeLessThanOrEqual(d.attempts);
      }
      // Each delivery's job completed once, on one of the two, and both instances took part.
      const completed = [a, b].map((s) => s.rt.webhooksOut.worker.counters.completed);
      expect(completed[0] + completed[1]).toBe(2 * N);
      expect(completed[0]).toBeGreaterThan(0);
      expect(completed[1]).toBeGreaterThan(0);
    } finally {
      await receiver.close();
      await a.stop();
      await b.stop();
    }
  });
});
