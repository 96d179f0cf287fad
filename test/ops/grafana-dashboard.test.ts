import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

// The Grafana dashboard in deploy/ only queries metrics msgd exports: every metric name in
// every panel's expression is one a scrape of a running msgd lists.

const DASHBOARD = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'deploy', 'grafana', 'msgd-dashboard.json');

let s: TestServer | undefined;
afterEach(async () => {
  await s?.stop();
  s = undefined;
});

/** Every series name a scrape can show: histograms and summaries add their suffixes. */
function exported(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m;
    names.add(name);
    if (type === 'histogram') for (const x of ['_bucket', '_sum', '_count']) names.add(name + x);
    if (type === 'summary') for (const x of ['_sum', '_count']) names.add(name + x);
  }
  return names;
}

/** Metric names in a PromQL expression: identifiers that are not functions, keywords or labels. */
function metricNames(expr: string): string[] {
  const withoutLabels = expr.replace(/\{[^}]*\}/g, '{}').replace(/\b(by|without)\s*\([^)]*\)/g, '');
  return [...withoutLabels.matchAll(/\b([a-z_][a-z0-9_]*)\b(?!\s*\()/g)]
    .map((m) => m[1])
    .filter((n) => /_/.test(n) && !/^\d/.test(n));
}

describe('the Grafana dashboard', () => {
  it('queries only metrics msgd exports', async () => {
    s = await startTestServer({ 'metrics.port': 0 });
    const names = exported(await (await fetch(s.metricsUrl!)).text());
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
