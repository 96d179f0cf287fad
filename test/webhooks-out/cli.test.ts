import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { runCli } from '../helpers/cli.js';
import type { TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, startReceiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import { FAST_SCHEDULE, deliveryRows, inbound, world, type World } from './helpers.js';

// msgctl webhooks deliveries | replay | enable | endpoints, run in-process against the store
// of a running msgd.

const msgctl = (s: TestServer, args: string[]) => runCli(args, { dataDir: s.dataDir, env: s.storeEnv });

const json = async (s: TestServer, args: string[]) => {
  const r = await msgctl(s, [...args, '--json']);
  if (r.code !== 0) throw new Error(`msgctl ${args.join(' ')}: ${r.code} ${r.stderr}`);
  return JSON.parse(r.stdout);
};

let tls: TlsFiles;
let w: World;
let ep: { id: string; secret: string };
let okEvent: string;
let deadEvent: string;

beforeAll(async () => {
  tls = makeCert();
  w = await world({}, { tls });
  ep = await w.register();
  okEvent = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550400', 'fine')).eventId;
  await waitFor(() => w.receiver.delivered.includes(okEvent), 'first delivered', 5000);
  w.receiver.behave({ kind: 'status', status: 500, body: 'broken today' });
  deadEvent = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550401', 'doomed')).eventId;
  await waitFor(
    async () => (await deliveryRows(w.server.ctx, ep.id)).find((d) => d.event_id === deadEvent)?.status === 'dead',
    'dead',
    8000,
  );
});
afterAll(async () => {
  await w.close();
  tls.cleanup();
});

describe('msgctl webhooks deliveries', () => {
  it('lists deliveries newest first; --failed only the failed; --attempts with the attempt log', async () => {
    const all = await json(w.server, ['webhooks', 'deliveries']);
    expect(all.data.map((d: any) => d.event_id)).toEqual([deadEvent, okEvent]);
    expect(all.data[0]).toMatchObject({
      status: 'dead',
      attempts: FAST_SCHEDULE.length,
      last_status_code: 500,
      url: w.receiver.url,
      event_type: 'message.received',
    });
    expect(all.data[1]).toMatchObject({ status: 'succeeded', attempts: 1, last_status_code: 200 });

    const failed = await json(w.server, ['webhooks', 'deliveries', '--failed', '--attempts']);
    expect(failed.data.map((d: any) => d.event_id)).toEqual([deadEvent]);
    expect(failed.data[0].attempt_log).toHaveLength(FAST_SCHEDULE.length);
    expect(failed.data[0].attempt_log[0]).toMatchObject({
      attempt: 1,
      status_code: 500,
      error: 'HTTP 500',
      response_snippet: 'broken today',
    });

    const text = await msgctl(w.server, ['webhooks', 'deliveries', '--endpoint', ep.id, '--attempts']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/DELIVERY\s+EVENT/);
    expect(text.stdout).toContain(deadEvent);
    expect(text.stdout).toContain('broken today');
    const none = await msgctl(w.server, ['webhooks', 'deliveries', '--endpoint', 'whe_nope']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^msgctl: webhook endpoint "whe_nope" not found/);
  });
});

describe('msgctl webhooks replay', () => {
  it('replays one event: the receiver gets the same event id again and the delivery succeeds', async () => {
    w.receiver.behave({ kind: 'ok' });
    const before = w.receiver.seen.get(deadEvent)!;
    const r = await json(w.server, ['webhooks', 'replay', deadEvent]);
    expect(r.queued).toEqual([
      { event_id: deadEvent, endpoint_id: ep.id, delivery_id: expect.stringMatching(/^dlv_/), kind: 'restarted' },
    ]);
    await waitFor(() => w.receiver.delivered.includes(deadEvent), 'replayed delivery', 5000);
    expect(w.receiver.seen.get(deadEvent)).toBe(before + 1);
    const d = await waitFor(
      async () =>
        (await deliveryRows(w.server.ctx, ep.id)).find((x) => x.event_id === deadEvent && x.status === 'succeeded'),
      'succeeded',
      3000,
    );
    // The attempt log continues; it is not renumbered.
    expect(d.attempts).toBe(FAST_SCHEDULE.length + 1);
  });

  it('--since replays every event in the window, delivered ones included (receivers dedupe by id)', async () => {
    const seenOk = w.receiver.seen.get(okEvent)!;
    const r = await msgctl(w.server, ['webhooks', 'replay', '--since', '1h']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/2 deliveries queued over 2 event\(s\)/);
    await waitFor(() => w.receiver.seen.get(okEvent) === seenOk + 1, 'ok event again', 5000);
    expect(w.receiver.delivered.filter((x) => x === okEvent)).toHaveLength(1);
  });

  it('usage errors exit 2', async () => {
    expect((await msgctl(w.server, ['webhooks', 'replay'])).code).toBe(2);
    expect((await msgctl(w.server, ['webhooks', 'replay', okEvent, '--since', '1h'])).code).toBe(2);
    expect((await msgctl(w.server, ['webhooks', 'replay', '--since', 'last tuesday'])).code).toBe(2);
    // Date.parse would read "1" as the year 2001 and replay everything.
    expect((await msgctl(w.server, ['webhooks', 'replay', '--since', '1'])).code).toBe(2);
    const missing = await msgctl(w.server, ['webhooks', 'replay', 'evt_01kzzzzzzzzzzzzzzzzzzzzzzz']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/event "evt_01kzzzzzzzzzzzzzzzzzzzzzzz" not found/);
  });
});

describe('msgctl webhooks endpoints / enable', () => {
  it('shows a disabled endpoint with its reason; enable brings deliveries back', async () => {
    const other = await startReceiver(tls);
    try {
      const created = await w.api('POST', '/v1/webhooks', { url: other.url });
      other.setSecrets([created.body.secret]);
      other.behave({ kind: 'status', status: 410 });
      const e1 = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550402', 'x')).eventId;
      await waitFor(
        async () =>
          (await w.server.ctx.store.get<{ status: string }>(
            sql`SELECT status FROM webhook_endpoints WHERE id = ${created.body.id}`,
          ))!.status === 'disabled',
        'disabled',
        5000,
      );

      const list = await json(w.server, ['webhooks', 'endpoints', '--partner', w.partner.slug]);
      const row = list.data.find((e: any) => e.id === created.body.id);
      expect(row).toMatchObject({ status: 'disabled', partner: w.partner.slug, url: other.url });
      expect(row.disabled_reason).toMatch(/410 Gone/);
      expect(JSON.stringify(list)).not.toContain('whsec_');
      const text = await msgctl(w.server, ['webhooks', 'endpoints']);
      expect(text.stdout).toMatch(new RegExp(`${created.body.id}\\s+${w.partner.slug}\\s+`));

      other.behave({ kind: 'ok' });
      const en = await msgctl(w.server, ['webhooks', 'enable', created.body.id]);
      expect(en.code).toBe(0);
      expect(en.stdout).toContain('replay --since');
      expect((await msgctl(w.server, ['webhooks', 'enable', created.body.id])).code).toBe(1);
      const e2 = (await inbound(w.server.ctx, w.partner.partnerId, w.channel, '+14155550403', 'y')).eventId;
      await waitFor(() => other.delivered.includes(e2), 'delivered after enable', 5000);
      expect(other.delivered).not.toContain(e1);
      const r = await json(w.server, ['webhooks', 'replay', e1, '--endpoint', created.body.id]);
      expect(r.queued).toHaveLength(1);
      await waitFor(() => other.delivered.includes(e1), 'missed event replayed', 5000);
    } finally {
      await other.close();
    }
  });
});
