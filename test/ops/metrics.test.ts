import { afterEach, describe, expect, it } from 'vitest';
import { serverStore, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { SMS, send, sandboxPartner } from '../helpers/gateways.js';
import { sql } from '../../src/db/sql.js';

// /metrics: Prometheus text, never public by default (a port of its own, or a bearer token on
// the main port), with what an operator alerts on.

let s: TestServer | undefined;
afterEach(async () => {
  await s?.stop();
  s = undefined;
});

const TOKEN = 'metrics-token-0123456789abcdef';

/** Sample lines of a metric: `name{labels} value`. */
function samples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `))
    .map((l) => {
      const m = /^[^{ ]+(?:\{(.*)\})? (\S+)$/.exec(l)!;
      const labels: Record<string, string> = {};
      for (const [, k, v] of (m[1] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[k] = v;
      return { labels, value: Number(m[2]) };
    });
}

describe('/metrics', () => {
  it('is not served unless configured', async () => {
    s = await startTestServer();
    expect((await fetch(`${s.url}/metrics`)).status).toBe(404);
    expect(s.metricsUrl).toBeNull();
  });

  it('behind metrics.token on the main port: 401 without it, the metrics with it', async () => {
    s = await startTestServer({ 'metrics.token': TOKEN, 'billing.balanceLowThreshold': '5' });
    const denied = await fetch(`${s.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-of-some-length' } });
    expect(denied.status).toBe(401);
    expect((await denied.json()).error.code).toBe('unauthorized');
    expect((await fetch(`${s.url}/metrics`)).status).toBe(401);

    const p = await sandboxPartner(s.ctx, { balance: '10', prices: { sms: '0.01' } });
    await setupPartner(s.ctx, { balance: '1' }); // under the 5.00 threshold
    expect((await send(s.url, SMS, { to: '+14155550123', text: 'hi' }, p.token)).status).toBe(200);
    expect((await send(s.url, SMS, { to: '+14155550123', text: 'hi' }, 'msgd_live_nope')).status).toBe(401);
    expect((await send(s.url, SMS, { to: 'nope', text: 'hi' }, p.token)).status).toBe(400);
    await fetch(`${s.url}/healthz`);
    // Methods Node accepts that msgd has no use for: counted under one label value.
    for (const method of ['PROPFIND', 'MKCOL', 'PURGE']) await fetch(`${s.url}/healthz`, { method });

    const r = await fetch(`${s.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await r.text();
    expect(samples(text, 'msgd_sends_total')).toEqual(
      expect.arrayContaining([
        { labels: { result: 'accepted' }, value: 1 },
        { labels: { result: 'refused', code: 'unauthorized' }, value: 1 },
        { labels: { result: 'refused', code: 'invalid_request' }, value: 1 },
      ]),
    );
    const health = samples(text, 'msgd_http_request_duration_seconds_count').find(
      (x) => x.labels.route === '/healthz' && x.labels.status === '200',
    );
    expect(health).toEqual({ labels: { method: 'GET', route: '/healthz', status: '200' }, value: 1 });
    const methods = new Set(samples(text, 'msgd_http_request_duration_seconds_count').map((x) => x.labels.method));
    expect([...methods].sort()).toEqual(['GET', 'POST', 'other']);
    expect(
      samples(text, 'msgd_http_request_duration_seconds_count').find((x) => x.labels.method === 'other')!.value,
    ).toBe(3);
    expect(samples(text, 'msgd_partners_below_low_balance')).toEqual([{ labels: {}, value: 1 }]);
    // The send's dispatch job or, once it ran, the sandbox's delivery report waiting 10 minutes.
    const jobs = samples(text, 'msgd_jobs');
    expect(jobs.some((x) => ['message.dispatch', 'sandbox.report'].includes(x.labels.kind) && x.value === 1)).toBe(
      true,
    );
    // Every state of every kind, empty ones at 0: no dead jobs is a 0, not a missing series.
    for (const kind of ['message.dispatch', 'sandbox.report', 'webhook.deliver'])
      expect(
        jobs
          .filter((x) => x.labels.kind === kind)
          .map((x) => x.labels.state)
          .sort(),
        kind,
      ).toEqual(['available', 'dead', 'retry', 'running']);
    expect(jobs.filter((x) => x.labels.state === 'dead').every((x) => x.value === 0)).toBe(true);
    // Gateway ids in other metrics' labels, with their names and kinds.
    const gw = (await s.ctx.store.get<{ name: string }>(sql`SELECT name FROM gateways WHERE id = ${p.gateways.sms}`))!;
    expect(samples(text, 'msgd_gateway_info')).toContainEqual({
      labels: { gateway: p.gateways.sms, name: gw.name, kind: 'sandbox' },
      value: 1,
    });
    expect(samples(text, 'msgd_gateway_info')).toHaveLength(5);
    expect(samples(text, 'msgd_webhook_endpoints')).toEqual([
      { labels: { status: 'enabled' }, value: 0 },
      { labels: { status: 'disabled' }, value: 0 },
    ]);
    // SQLite's file sizes; PostgreSQL's files are its server's (and its exporter's) to watch.
    if (serverStore === 'sqlite')
      expect(samples(text, 'msgd_sqlite_file_bytes').find((x) => x.labels.file === 'db')!.value).toBeGreaterThan(0);
    else expect(samples(text, 'msgd_sqlite_file_bytes')).toEqual([]);
    expect(samples(text, 'nodejs_eventloop_lag_seconds')).toHaveLength(1);
    expect(samples(text, 'process_resident_memory_bytes')[0].value).toBeGreaterThan(0);
    // Lines dropped since start: a counter, named as one.
    expect(text).toContain('# TYPE msgd_log_lines_dropped_total counter');
    expect(samples(text, 'msgd_log_lines_dropped_total')).toEqual([{ labels: {}, value: 0 }]);
    expect(samples(text, 'msgd_build_info')).toEqual([
      { labels: { version: s.rt.version, node: process.version }, value: 1 },
    ]);
    // The token never shows in the log, not even in the configuration logged at start.
    expect(s.logs.join('')).not.toContain(TOKEN);
  });

  it('on metrics.port, a listener of its own; the main port does not serve it', async () => {
    s = await startTestServer({ 'metrics.port': 0 });
    expect(s.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const r = await fetch(s.metricsUrl!);
    expect(r.status).toBe(200);
    expect(await r.text()).toContain('# TYPE msgd_http_request_duration_seconds histogram');
    expect((await fetch(s.metricsUrl!.replace('/metrics', '/other'))).status).toBe(404);
    expect((await fetch(s.metricsUrl!, { method: 'POST' })).status).toBe(405);
    expect((await fetch(`${s.url}/metrics`)).status).toBe(404);
  });
});
