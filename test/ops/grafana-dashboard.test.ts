import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { exportedNames, hasPromtool, metricNames, notOnThisStore, promtool } from './helpers.js';

// The Grafana dashboard in deploy/ only queries metrics msgd exports: every metric name in
// every panel's expression is one a scrape of a running msgd lists.

const DASHBOARD = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'deploy', 'grafana', 'msgd-dashboard.json');

let s: TestServer | undefined;
afterEach(async () => {
  await s?.stop();
  s = undefined;
});

describe('the Grafana dashboard', () => {
  it('queries only metrics msgd exports', async () => {
    s = await startTestServer({ 'metrics.port': 0 });
    const names = exportedNames(await (await fetch(s.metricsUrl!)).text());
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
    const exprs: string[] = dashboard.panels.flatMap((p: any) => p.targets.map((t: any) => t.expr));
    expect(exprs.length).toBeGreaterThan(10);
    const used = new Set(exprs.flatMap(metricNames));
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((n) => !names.has(n) && !notOnThisStore(n))).toEqual([]);
    // What an operator looks for first: CPU beside memory, dispatch by gateway (named) and
    // provider code, provider latency, webhooks in and out, readiness.
    for (const n of [
      'process_cpu_seconds_total',
      'msgd_dispatch_attempts_total',
      'msgd_dispatch_errors_total',
      'msgd_gateway_info',
      'msgd_provider_request_duration_seconds_bucket',
      'msgd_provider_webhooks_total',
      'msgd_webhook_deliveries_total',
      'msgd_ready',
    ])
      expect(used, n).toContain(n);
    const cpu = dashboard.panels.find((p: any) => p.title === 'Memory and CPU');
    expect(cpu.targets.map((t: any) => t.expr).join(' ')).toMatch(/rate\(process_cpu_seconds_total\{/);
    // The template variable reads a metric msgd exports too.
    const job = dashboard.templating.list.find((v: any) => v.name === 'job');
    expect(names.has(/label_values\((\w+)/.exec(job.query)![1])).toBe(true);
  });

  it('has queries Prometheus can parse', (ctx) => {
    if (!hasPromtool()) return ctx.skip();
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
    // Each query as a recording rule, with Grafana's variable filled in: promtool parses them all.
    const rules = dashboard.panels.flatMap((p: any) =>
      p.targets.map((t: any) => ({
        record: `dashboard:panel${p.id}:${t.refId}`,
        expr: t.expr.replaceAll('$job', 'msgd'),
      })),
    );
    const dir = mkdtempSync(join(tmpdir(), 'msgd-dashboard-'));
    try {
      const file = join(dir, 'rules.json');
      // JSON is YAML: promtool reads it as a rule file.
      writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
      const r = promtool(['check', 'rules', file]);
      expect(r.status, r.out).toBe(0);
      expect(r.out).toContain(`SUCCESS: ${rules.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
