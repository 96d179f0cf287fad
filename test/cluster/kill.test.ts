import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CoreCtx } from '../../src/core/context.js';
import { sql } from '../../src/db/sql.js';
import type { RecordedRequest } from '../fakes/common.js';
import { type GraphFake, startGraphFake } from '../fakes/graph.js';
import { type SendgridFake, startSendgridFake } from '../fakes/sendgrid.js';
import { startTwilioFake, type TwilioFake } from '../fakes/twilio.js';
import { postWebhook, twilioForm, twilioHeaders, type TwilioParams } from '../fakes/webhook-senders.js';
import {
  EMAIL,
  SMS,
  sendgridGateway,
  TWILIO_SID,
  TWILIO_TOKEN,
  twilioGateway,
  WHATSAPP,
  whatsappGateway,
} from '../helpers/gateways.js';
import { setupPartner } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, type Receiver, startReceiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import { moneyProblems, strandedMessages } from '../pg/msgd-child.js';
import { migratedDatabase } from '../pg/helpers.js';
import { type MsgdCluster, startMsgdCluster } from './harness.js';

// Three msgd on one PostgreSQL behind a round-robin proxy, under a send load from two partners
// (SMS through Twilio, email through SendGrid, WhatsApp through Graph: fakes answering as the
// real APIs), Twilio's signed status callbacks posted back through the proxy, and an outbound
// webhook endpoint at a real HTTPS receiver. During the load five instances are killed with
// kill -9 (each started again), the first of them the leader, and the providers fail for a
// while. Once the cluster is quiet: every accepted message is settled, the ledger balances
// (msgctl doctor), no message is debited twice, a message a provider got twice is flagged, an
// event reaches the endpoint more than once only with its same id, the shaped gateway never went
// over its rate, and the leader's upkeep (marking the killed leader dead) ran on another instance.

const db = migratedDatabase();
let twilio: TwilioFake;
let sendgrid: SendgridFake;
let graph: GraphFake;
let tls: TlsFiles;
let receiver: Receiver;
let c: MsgdCluster;

/** The shaped gateway's rate, messages a second. */
const RATE = 20;

beforeAll(async () => {
  twilio = await startTwilioFake();
  sendgrid = await startSendgridFake();
  graph = await startGraphFake();
  tls = makeCert();
  receiver = await startReceiver(tls);
  c = await startMsgdCluster({
    databaseUrl: db.url,
    config: {
      // Leases short enough that a killed instance's claims come back within the test.
      jobs: { leaseSeconds: 5, lifelineIntervalSeconds: 1, backoffBaseMs: 50, backoffCapMs: 1000, concurrency: 32 },
      // Longer than any call takes here, loaded as the machine may be.
      dispatch: { timeoutMs: 30_000 },
      webhooksOut: {
        caFile: tls.cert,
        allowPrivateTargets: true,
        timeoutMs: 5_000,
        retryScheduleMs: [0, 100, 200, 400, 800, 1000, 1000, 1000],
      },
    },
  });
}, 180_000);
afterAll(async () => {
  await c?.close();
  await receiver?.close();
  tls?.cleanup();
  await twilio?.close();
  await sendgrid?.close();
  await graph?.close();
});

const client = new Agent({ connections: 16 });
afterAll(() => client.close());

async function post(path: string, token: string, body: unknown) {
  const r = await request(`${c.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
    dispatcher: client,
  });
  return { status: r.statusCode, body: (await r.body.json()) as any };
}

interface Row {
  id: string;
  partner_id: string;
  status: string;
  content: string;
  dispatch_uncertain: number;
  dispatch_in_flight: number;
}

const outbound = (ctx: CoreCtx) =>
  ctx.store.all<Row>(
    sql`SELECT id, partner_id, status, content, dispatch_uncertain, dispatch_in_flight
          FROM messages WHERE direction = 'outbound' ORDER BY id`,
  );

/** The unique tag each send carries (SMS text, email subject), read from the message or the provider call. */
const tagOf = (m: Row) => {
  const content = JSON.parse(m.content) as { text?: string; subject?: string };
  return content.subject ?? content.text ?? '';
};
const providerTag = (r: RecordedRequest) => {
  const body = r.body as any;
  return String(body?.Body ?? body?.subject ?? body?.text?.body ?? '');
};

const UNSETTLED = new Set(['queued', 'sending']);

async function instancesJson() {
  const r = await c.msgctl(['--json', 'instances']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as {
    data: { id: string; pid: number; state: string; leader: boolean; dead_at: string | null }[];
  };
}

describe('three msgd under load, five kill -9s and a provider outage', { timeout: 170_000 }, () => {
  it('loses nothing, doubles nothing, keeps the rate, and the leader is taken over', async () => {
    // Partner a: SMS on a gateway shaped to RATE/s, email; an endpoint for its events.
    const a = await setupPartner(c.ctx, { balance: '100', prices: { sms: '0.01', email: '0.002' } });
    const shaped = await twilioGateway(c.ctx, a.partnerId, twilio, { rate_per_second: RATE });
    await sendgridGateway(c.ctx, a.partnerId, sendgrid);
    // Partner b: SMS on an unshaped gateway, WhatsApp through Graph.
    const b = await setupPartner(c.ctx, { balance: '100', prices: { sms: '0.01', whatsapp: '0.005' } });
    await twilioGateway(c.ctx, b.partnerId, twilio);
    await whatsappGateway(c.ctx, b.partnerId, graph);
    // Twilio holds each call a while, so that some are at the provider when an instance dies:
    // those go again after the lease, and must be flagged.
    twilio.latencyMs = 200;
    const hook = await post('/v1/webhooks', a.token, { url: receiver.url });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    receiver.setSecrets([hook.body.secret]);

    // The load: SMS of partner a (shaped), SMS of partner b, emails of partner a, in turn, from
    // eight clients through the proxy, a partner's steady trickle rather than a flood, until the
    // kills are over (at most 600 sends).
    const MAX_SENDS = 600;
    const sends = [
      (i: number) => ({ token: a.token, path: SMS, body: { to: '+14155550123', text: `a-sms ${i}` } }),
      (i: number) => ({ token: b.token, path: SMS, body: { to: '+14155550124', text: `b-sms ${i}` } }),
      (i: number) => ({
        token: a.token,
        path: EMAIL,
        body: { to: 'x@example.com', subject: `a-mail ${i}`, html: '<b>h</b>' },
      }),
      (i: number) => ({
        token: b.token,
        path: WHATSAPP,
        body: { to: '+14155550125', type: 'text', text: `b-wa ${i}` },
      }),
    ];
    const sendOf = (i: number) => sends[i % sends.length](i);
    const accepted = new Set<string>();
    const statuses: Record<string, number> = {};
    let next = 0;
    let killsDone = false;
    const load = Promise.all(
      Array.from({ length: 8 }, async () => {
        while (!killsDone && next < MAX_SENDS) {
          const p = sendOf(next++);
          try {
            const r = await post(p.path, p.token, p.body);
            statuses[r.status] = (statuses[r.status] ?? 0) + 1;
            if (r.status === 200) accepted.add(r.body.id);
          } catch {
            // The instance died under the request: its outcome is unknown to the client.
            statuses.lost = (statuses.lost ?? 0) + 1;
          }
          await new Promise((r) => setTimeout(r, 150));
        }
      }),
    );

    // Twilio's status callbacks: each message it accepted reported delivered, signed, posted
    // through the proxy (to msgd's public address), again until answered 200 as Twilio retries.
    const reported = new Set<string>();
    let callbacksDone = false;
    const callbacks = (async () => {
      while (!callbacksDone) {
        for (const r of twilio.requests) {
          const sid = (r.reply?.status === 201 && (JSON.parse(r.reply.body) as { sid: string }).sid) || null;
          if (!sid || reported.has(sid)) continue;
          const given = new URL(String((r.body as any).StatusCallback));
          const url = `${c.url}${given.pathname}${given.search}`;
          const params: TwilioParams = {
            AccountSid: TWILIO_SID,
            ApiVersion: '2010-04-01',
            From: String((r.body as any).From),
            MessageSid: sid,
            MessageStatus: 'delivered',
            SmsSid: sid,
            SmsStatus: 'delivered',
            To: String((r.body as any).To),
          };
          try {
            const res = await postWebhook(url, twilioForm(params), twilioHeaders(TWILIO_TOKEN, url, params));
            if (res.status === 200) reported.add(sid);
          } catch {
            // killed under it: posted again on the next pass
          }
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    })();

    const killed: number[] = [];
    const killAndRestart = async (i: number) => {
      await c.kill(i);
      killed.push(i);
      await new Promise((r) => setTimeout(r, 300));
      await c.restart(i);
    };

    // First kill: the leader, once it is known and the load under way.
    await waitFor(() => accepted.size >= 60, 'the load to be under way', 30_000);
    const before = await waitFor(
      async () => (await instancesJson()).data.find((x) => x.state === 'running' && x.leader),
      'an instance to lead',
      10_000,
    );
    const leaderIndex = c.instances.findIndex((x) => x.child?.pid === before.pid);
    expect(leaderIndex).toBeGreaterThanOrEqual(0);
    await c.kill(leaderIndex);
    killed.push(leaderIndex);
    // Another leads within the documented bound (1 s) and says so in its next beat (2 s).
    const after = await waitFor(
      async () => (await instancesJson()).data.find((x) => x.state === 'running' && x.leader && x.id !== before.id),
      'another instance to lead',
      10_000,
      200,
    );
    expect(c.instances.some((x) => x.up && x.child?.pid === after.pid)).toBe(true);
    await c.restart(leaderIndex);

    // The outage: both providers answer 5xx to their next calls (a couple of seconds' worth).
    twilio.failNext({ kind: 'status', status: 503, count: 30 });
    sendgrid.failNext({ kind: 'status', status: 500, count: 15 });
    graph.failNext({ kind: 'status', status: 503, count: 15 });

    // Four more kills of random instances, each started again, while sends still arrive.
    // Drawn at random once and fixed, so that a failure replays.
    for (const victim of [2, 0, 2, 1]) {
      await new Promise((r) => setTimeout(r, 800));
      await killAndRestart(victim);
    }
    expect(killed).toHaveLength(5);
    killsDone = true;
    await load;

    // Quiet: every message settled, no dispatch job left, every Twilio message reported.
    await waitFor(
      async () => {
        const rows = await outbound(c.ctx);
        const jobs = await c.ctx.store.get<{ n: number }>(
          sql`SELECT CAST(count(*) AS BIGINT) AS n FROM jobs WHERE kind = 'message.dispatch'`,
        );
        return rows.every((m) => !UNSETTLED.has(m.status)) && Number(jobs!.n) === 0;
      },
      'every message to settle',
      60_000,
      250,
    );
    await waitFor(
      () => twilio.requests.filter((r) => r.reply?.status === 201).length === reported.size && reported.size > 0,
      'every status callback answered',
      30_000,
      250,
    );
    callbacksDone = true;
    await callbacks;

    const rows = await outbound(c.ctx);
    const byId = new Map(rows.map((m) => [m.id, m]));
    // Every send answered 200 is there, settled.
    for (const id of accepted) {
      const m = byId.get(id);
      expect(m, `accepted ${id} is missing`).toBeDefined();
      expect(UNSETTLED.has(m!.status), `${id} is ${m!.status}`).toBe(false);
    }
    expect(accepted.size).toBeGreaterThanOrEqual(150);
    expect(rows.every((m) => m.dispatch_in_flight === 0)).toBe(true);

    // The ledger: the doctor's checks, and per message one debit (a refund only when refunded).
    const doctor = await c.msgctl(['--json', 'doctor']);
    const report = JSON.parse(doctor.stdout);
    expect(report.checks.filter((x: any) => x.status === 'fail')).toEqual([]);
    for (const p of [a, b]) {
      expect(await moneyProblems(c.ctx, p.partnerId)).toEqual([]);
      expect(await strandedMessages(c.ctx, p.partnerId)).toEqual([]);
    }

    // A message the provider took twice is flagged; nothing reached a provider unaccepted.
    const calls = new Map<string, number>();
    for (const r of [...twilio.requests, ...sendgrid.requests, ...graph.requests]) {
      if (!r.reply || r.reply.status >= 300) continue;
      const tag = providerTag(r);
      calls.set(tag, (calls.get(tag) ?? 0) + 1);
    }
    const tags = new Map(rows.map((m) => [tagOf(m), m]));
    for (const [tag, n] of calls) {
      const m = tags.get(tag);
      expect(m, `the provider got ${tag}, which msgd has no message for`).toBeDefined();
      if (n > 1) expect(m!.dispatch_uncertain, `${m!.id} (${tag}) went ${n} times unflagged`).toBe(1);
    }
    // The kills caught calls at the provider: some messages did go twice, every one flagged.
    expect([...calls.values()].some((n) => n > 1)).toBe(true);
    for (const m of rows.filter((x) => x.status !== 'failed'))
      expect(calls.get(tagOf(m)) ?? 0, `provider calls for ${m.id}`).toBeGreaterThanOrEqual(1);

    // Events at the endpoint: all verified; one (message, event) has one event id, however often it came.
    // Every event fanned out first: one not yet fanned out has no delivery to wait for.
    await waitFor(
      async () => {
        const open = await c.ctx.store.get<{ n: number }>(
          sql`SELECT CAST(count(*) AS BIGINT) AS n FROM webhook_deliveries WHERE status IN ('pending', 'failed')`,
        );
        const unfanned = await c.ctx.store.get<{ n: number }>(
          sql`SELECT CAST(count(*) AS BIGINT) AS n FROM events WHERE fanned_out = 0`,
        );
        return Number(open!.n) === 0 && Number(unfanned!.n) === 0;
      },
      'every event fanned out and every delivery settled',
      30_000,
      250,
    );
    const unsettled = await c.ctx.store.all<{ status: string }>(
      sql`SELECT status FROM webhook_deliveries WHERE status <> 'succeeded'`,
    );
    expect(unsettled).toEqual([]);
    expect(receiver.received.length).toBeGreaterThan(0);
    expect(receiver.received.filter((r) => !r.verified)).toEqual([]);
    const ids = new Map<string, Set<string>>();
    for (const r of receiver.received) {
      const key = `${r.body.message_id}/${r.body.event}`;
      ids.set(key, (ids.get(key) ?? new Set()).add(r.id));
    }
    const doubled = [...ids].filter(([, s]) => s.size > 1).map(([k, s]) => `${k}: ${[...s].join(', ')}`);
    expect(doubled).toEqual([]);
    // Each of partner a's delivered SMS told once as delivered.
    const deliveredSms = rows.filter((m) => m.partner_id === a.partnerId && m.status === 'delivered');
    expect(deliveredSms.length).toBeGreaterThan(0);
    for (const m of deliveredSms) expect(ids.has(`${m.id}/message.delivered`), `${m.id} delivered event`).toBe(true);

    // The shaped gateway: at most its rate and 5 % in any 5 s window of calls it received.
    const at = twilio.requests
      .filter((r) => String((r.body as any)?.From) === shaped.from)
      .map((r) => r.at)
      .sort((x, y) => x - y);
    expect(at.length).toBeGreaterThanOrEqual(50);
    const windowMs = 5_000;
    const bound = Math.floor(((windowMs / 1000) * RATE * 105) / 100);
    for (let i = 0; i < at.length; i++) {
      const inWindow = at.filter((t) => t >= at[i] && t < at[i] + windowMs).length;
      expect(inWindow, `calls in the 5 s from call ${i}`).toBeLessThanOrEqual(bound);
    }

    // The leader's upkeep ran on the new leader: the killed leader's row is marked dead.
    await waitFor(
      async () => (await instancesJson()).data.find((x) => x.id === before.id && x.state === 'dead' && x.dead_at),
      'the killed leader marked dead by another',
      20_000,
      500,
    );
    // Every answer was a 200, or the proxy's 502 for an instance killed under the request.
    expect(Object.keys(statuses).filter((k) => k !== '200' && k !== '502' && k !== 'lost')).toEqual([]);
  });
});
