import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { serverStore, startTestServer, type TestServer } from '../helpers/server.js';
import { exportedNames, hasPromtool, metricNames, notOnThisStore, promtool } from './helpers.js';

// The alerting rules in deploy/prometheus/ are valid rules (promtool check rules), read only
// metrics a running msgd exports, and are the ones docs/operations.md shows. Readiness is a
// metric: msgd_ready is what /readyz answers, so the not-ready alert needs no outside probe.

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const RULES = join(ROOT, 'deploy', 'prometheus', 'msgd-alerts.yml');

let s: TestServer | undefined;
afterEach(async () => {
  await s?.stop();
  s = undefined;
});

const scrape = async (server: TestServer) => (await fetch(server.metricsUrl!)).text();
const ready = (text: string) => Number(/^msgd_ready (\S+)$/m.exec(text)?.[1]);

describe('alerting rules', () => {
  it('pass promtool check rules', (ctx) => {
    if (!hasPromtool()) return ctx.skip();
    const r = promtool(['check', 'rules', RULES]);
    expect(r.status, r.out).toBe(0);
    expect(r.out).toMatch(/SUCCESS: \d+ rules found/);
  });

  it('read only metrics msgd exports, and are the ones docs/operations.md shows', async () => {
    const text = readFileSync(RULES, 'utf8');
    const exprs = [...text.matchAll(/^\s+expr: (.+)$/gm)].map((m) => m[1]);
    expect(exprs.length).toBeGreaterThan(10);
    s = await startTestServer({ 'metrics.port': 0 });
    const names = exportedNames(await scrape(s));
    const used = new Set(exprs.flatMap(metricNames));
    expect(used).toContain('msgd_ready');
    expect([...used].filter((n) => !names.has(n) && !notOnThisStore(n))).toEqual([]);
    // No blackbox exporter: nothing reads a probe's metrics.
    expect(text).not.toContain('probe_');
    const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
    expect(doc).toContain('```yaml\n' + text + '```');
  });

  it('msgd_ready is 1 while /readyz answers 200', async () => {
    s = await startTestServer({ 'metrics.port': 0 });
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    expect(ready(await scrape(s))).toBe(1);
  });

  // The disk floor is the data directory's, which only SQLite has.
  it.skipIf(serverStore === 'postgres')('msgd_ready is 0 while /readyz answers 503', async () => {
    // A disk under health.minFreeDiskMb: not ready, and the metric says so.
    s = await startTestServer({ 'metrics.port': 0, 'health.minFreeDiskMb': 1024 * 1024 * 1024 });
    expect((await fetch(`${s.url}/readyz`)).status).toBe(503);
    const text = await scrape(s);
    expect(ready(text)).toBe(0);
    expect(text).toContain('# TYPE msgd_ready gauge');
  });
});
