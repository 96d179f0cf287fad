import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COUNTER_NAMES, Counters } from '../../src/core/counters.js';
import { openStore } from '../../src/db/open-store.js';
import { sql } from '../../src/db/sql.js';
import { readCounterWindows, readHeartbeat, serverState, STALE_AFTER_MS } from '../../src/core/counter-store.js';
import { postWebhook, sandboxHeaders } from '../fakes/webhook-senders.js';
import { SMS, sandboxPartner } from '../helpers/gateways.js';
import { keptStore, postJson, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

// msgd's work counters and heartbeat against a real server: a sandbox send is counted as sent
// per gateway, its status webhook as verified, a forged one as a bad signature, and the
// heartbeat writes them where another process (msgctl tui) reads them. On both stores.

describe('Counters', () => {
  it('keeps cumulative values per label set, error codes bounded', () => {
    const c = new Counters();
    c.dispatch('gw_a', 'sent');
    c.dispatch('gw_a', 'sent');
    c.dispatch('gw_a', 'retried', 'http_503');
    c.dispatch('gw_a', 'failed', 'bad,code=1');
    c.webhookIn('twilio', 'bad_signature');
    c.delivery('ok');
    c.endpointDisabled();
    const snap = c.snapshot();
    const v = (name: string, labels: Record<string, string>) =>
      snap.find((s) => s.name === name && JSON.stringify(s.labels) === JSON.stringify(labels))?.value;
    expect(v(COUNTER_NAMES.dispatch, { gateway: 'gw_a', outcome: 'sent' })).toBe(2);
    expect(v(COUNTER_NAMES.dispatch, { gateway: 'gw_a', outcome: 'retried' })).toBe(1);
    expect(v(COUNTER_NAMES.dispatchErrors, { gateway: 'gw_a', code: 'http_503' })).toBe(1);
    expect(v(COUNTER_NAMES.dispatchErrors, { gateway: 'gw_a', code: 'bad_code_1' })).toBe(1);
    expect(v(COUNTER_NAMES.webhooksIn, { provider: 'twilio', verdict: 'bad_signature' })).toBe(1);
    expect(v(COUNTER_NAMES.webhooksIn, { provider: 'twilio', verdict: 'verified' })).toBe(0);
    expect(v(COUNTER_NAMES.deliveries, { outcome: 'ok' })).toBe(1);
    expect(v(COUNTER_NAMES.endpointsDisabled, {})).toBe(1);
    for (let i = 0; i < 80; i++) c.dispatch('gw_b', 'failed', `code${i}`);
    const codes = c.snapshot().filter((s) => s.name === COUNTER_NAMES.dispatchErrors && s.labels.gateway === 'gw_b');
    expect(codes.length).toBe(51);
    expect(codes.find((s) => s.labels.code === 'other')?.value).toBe(30);
  });
});

describe('msgd heartbeat and counters in the database', () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => {
    await s?.stop();
  });

  it('says msgd is running, with its version and start time', async () => {
    const hb = (await readHeartbeat(s.ctx))!;
    expect(hb.version).toBe(s.rt.version);
    expect(hb.pid).toBe(process.pid);
    expect(serverState(hb, Date.now()).state).toBe('running');
    expect(serverState(hb, hb.beatAt + STALE_AFTER_MS + 1).state).toBe('silent');
    expect(hb.gauges).toMatchObject({ waiting: 0, inFlight: 0, retrying: 0, dead: 0 });
  });

  it('counts a sandbox send and its status webhook, and a forged webhook', async () => {
    const p = await sandboxPartner(s.ctx, { channels: ['sms'], balance: '10.00' });
    // A fast report: the sandbox delivers at once.
    await s.ctx.store.run(sql`UPDATE gateways SET settings = '{"delivery_delay_ms":0}' WHERE id = ${p.gateways.sms}`);
    const r = await postJson(`${s.url}${SMS}`, { to: '+14155550123', text: 'hi' }, p.token);
    expect(r.status).toBe(200);
    const body = JSON.stringify({ object: 'msgd_sandbox', events: [] });
    const forged = await postWebhook(`${s.url}/api/webhook.php`, body, sandboxHeaders('guess', body));
    expect(forged.status).toBe(401);
    const window = await waitFor(
      async () => {
        await s.rt.heartbeat!.beat();
        const w = await readCounterWindows(s.ctx, Date.now());
        const get = (name: string, k: string, v: string, k2: string, v2: string) =>
          w.find((x) => x.name === name && x.labels[k] === v && x.labels[k2] === v2)?.lastMinute ?? 0;
        const sent = get(COUNTER_NAMES.dispatch, 'gateway', p.gateways.sms, 'outcome', 'sent');
        const verified = get(COUNTER_NAMES.webhooksIn, 'provider', 'sandbox', 'verdict', 'verified');
        const bad = get(COUNTER_NAMES.webhooksIn, 'provider', 'sandbox', 'verdict', 'bad_signature');
        return sent === 1 && verified === 1 && bad === 1 ? w : null;
      },
      'the send, its report and the forged webhook counted',
      10_000,
    );
    // Counted once each, however many beats wrote in between.
    const hour = window.find((x) => x.name === COUNTER_NAMES.dispatch && x.labels.outcome === 'sent')!;
    expect(hour.lastHour).toBe(1);
  });

  it('marks itself stopped on a clean shutdown', async () => {
    const kept = await keptStore();
    try {
      const other = await startTestServer({}, { dataDir: kept.dataDir, env: kept.env });
      const { ctx } = other;
      await other.stop();
      // Read as msgctl would, through a store of its own.
      const opened = await openStore(ctx.config, { env: kept.env, create: false, migrate: false, poolSize: 1 });
      try {
        const hb = (await readHeartbeat({ ...ctx, db: opened.db, store: opened.store }))!;
        expect(hb.running).toBe(false);
        expect(serverState(hb, Date.now()).state).toBe('stopped');
      } finally {
        await opened.close();
      }
    } finally {
      await kept.drop();
    }
  });
});
