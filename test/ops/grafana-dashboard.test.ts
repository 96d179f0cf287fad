import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { exportedNames, metricNames } from './helpers.js';

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
    expect([...used].filter((n) => !names.has(n))).toEqual([]);
    // The template variable reads a metric msgd exports too.
    const job = dashboard.templating.list.find((v: any) => v.name === 'job');
    expect(names.has(/label_values\((\w+)/.exec(job.query)![1])).toBe(true);
  });
});
