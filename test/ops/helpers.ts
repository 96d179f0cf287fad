import { spawnSync } from 'node:child_process';
import { expect } from 'vitest';
import { serverStore } from '../helpers/server.js';

// What the metrics tests share: the series names a scrape shows, the metric names a PromQL
// expression reads, and promtool where it is installed.

/** Every series name a scrape can show: histograms and summaries add their suffixes. */
export function exportedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name, type] = m;
    names.add(name);
    if (type === 'histogram') for (const x of ['_bucket', '_sum', '_count']) names.add(name + x);
    if (type === 'summary') for (const x of ['_sum', '_count']) names.add(name + x);
  }
  return names;
}

/**
 * A series a msgd on this run's store does not export by design: SQLite's file sizes on
 * PostgreSQL, whose server's files are its own exporter's to watch (docs/operations.md).
 */
export function notOnThisStore(name: string): boolean {
  return serverStore === 'postgres' && name.startsWith('msgd_sqlite_');
}

/** Metric names in a PromQL expression: identifiers that are not functions, keywords or labels. */
export function metricNames(expr: string): string[] {
  const withoutLabels = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '{}')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '');
  return [...withoutLabels.matchAll(/\b([a-z_][a-z0-9_]*)\b(?!\s*\()/g)]
    .map((m) => m[1])
    .filter((n) => /_/.test(n) && !/^\d/.test(n));
}

/**
 * Whether promtool can be run. Without it a test skips on a developer's machine; under
 * CI=true (CI installs it, .ci/run) a missing promtool fails the test instead.
 */
export function hasPromtool(): boolean {
  if (!spawnSync('promtool', ['--version']).error) return true;
  expect(process.env.CI, 'promtool is not installed (Debian: apt-get install prometheus)').not.toBe('true');
  return false;
}

/** promtool with these arguments and stdin: its exit status and everything it wrote. */
export function promtool(args: string[], input?: string): { status: number | null; out: string } {
  const r = spawnSync('promtool', args, { input, encoding: 'utf8' });
  return { status: r.status, out: r.stdout + r.stderr };
}
