import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { SMS, send, sandboxPartner } from '../helpers/gateways.js';
import { waitFor } from '../helpers/wait.js';
import { hasPromtool, promtool } from './helpers.js';
import { sql } from '../../src/db/sql.js';

// A scrape is valid Prometheus text that Prometheus' own linter accepts: `promtool check
// metrics` where promtool is installed (CI installs it and fails without it), and everywhere
// the exposition format's rules a scraper and a query depend on, checked here line by line.

let s: TestServer;
let text: string;

beforeAll(async () => {
  s = await startTestServer({ 'metrics.port': 0 });
  const p = await sandboxPartner(s.ctx, { balance: '10', channels: ['sms'] });
  await s.ctx.store.run(sql`UPDATE gateways SET settings = '{"delivery_delay_ms":0}' WHERE id = ${p.gateways.sms}`);
  // Every kind of series with samples: a send accepted, dispatched and reported, one refused,
  // a method no route takes, a request the router does not know.
  expect((await send(s.url, SMS, { to: '+14155550123', text: 'hi' }, p.token)).status).toBe(200);
  expect((await send(s.url, SMS, { to: 'nope', text: 'hi' }, p.token)).status).toBe(400);
  expect((await fetch(`${s.url}/v1/messages`, { method: 'PROPFIND' })).status).toBeGreaterThanOrEqual(400);
  expect((await fetch(`${s.url}/no/such/path`)).status).toBe(404);
  text = await waitFor(
    async () => {
      const t = await (await fetch(s.metricsUrl!)).text();
      return /msgd_provider_webhooks_total\{provider="sandbox",verdict="verified"\} 1/.test(t) ? t : null;
    },
    'the send and its report in /metrics',
    10_000,
    50,
  );
});
afterAll(async () => {
  await s?.stop();
});

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const VALUE = /^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)$/;

interface Family {
  name: string;
  type: string;
  help: string | null;
  samples: { name: string; labels: [string, string][]; value: string }[];
}

/** The exposition text's families, failing on any line that is not HELP, TYPE or a well-formed sample. */
function parse(body: string): Family[] {
  const families: Family[] = [];
  const lines = body.split('\n');
  expect(lines.at(-1), 'the text ends with a newline').toBe('');
  for (const line of lines.slice(0, -1)) {
    if (line === '') continue;
    let m = /^# HELP (\S+) (.*)$/.exec(line);
    if (m) {
      expect(
        families.some((f) => f.name === m![1]),
        `one HELP for ${m[1]}`,
      ).toBe(false);
      // HELP text escapes only a backslash and a newline.
      expect(m[2].replace(/\\[\\n]/g, ''), `HELP of ${m[1]}`).not.toMatch(/\\/);
      families.push({ name: m[1], type: 'untyped', help: m[2], samples: [] });
      continue;
    }
    m = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (m) {
      const f = families.at(-1);
      expect(f?.name, `TYPE ${m[1]} right after its HELP`).toBe(m[1]);
      expect(f!.samples, `TYPE ${m[1]} before its samples`).toEqual([]);
      f!.type = m[2];
      continue;
    }
    expect(line, 'no other comment').not.toMatch(/^#/);
    m = /^([^{ ]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    expect(m, `a sample line: ${line}`).not.toBeNull();
    const [, name, rawLabels, value] = m!;
    expect(name, line).toMatch(NAME);
    expect(value, line).toMatch(VALUE);
    const labels: [string, string][] = [];
    if (rawLabels !== undefined) {
      // name="value" pairs, comma-separated; a value escapes \, " and newlines and nothing else.
      const pair = /([^=,]+)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/y;
      let at = 0;
      while (at < rawLabels.length) {
        pair.lastIndex = at;
        const p = pair.exec(rawLabels);
        expect(p, `label pairs of ${line} from ${rawLabels.slice(at)}`).not.toBeNull();
        labels.push([p![1], p![2]]);
        at = pair.lastIndex;
      }
    }
    const f = families.at(-1);
    expect(f, `a family for ${line}`).toBeDefined();
    f!.samples.push({ name, labels, value });
  }
  return families;
}

describe('a scrape', () => {
  it('passes promtool check metrics', (ctx) => {
    if (!hasPromtool()) return ctx.skip();
    expect(promtool(['check', 'metrics'], text)).toEqual({ status: 0, out: '' });
  });

  it('follows the exposition format and its naming rules', () => {
    const families = parse(text);
    expect(families.length).toBeGreaterThan(20);
    const seen = new Set<string>();
    for (const f of families) {
      expect(f.name).toMatch(NAME);
      expect(f.help, `${f.name} has help`).toBeTruthy();
      expect(f.type, `${f.name} has a type`).not.toBe('untyped');
      // A counter's name ends in _total, and only a counter's does.
      if (f.type === 'counter') expect(f.name, `${f.name} is a counter`).toMatch(/_total$/);
      else expect(f.name, `${f.name} is a ${f.type}`).not.toMatch(/_total$/);
      const suffixes =
        f.type === 'histogram' ? ['_bucket', '_sum', '_count'] : f.type === 'summary' ? ['', '_sum', '_count'] : [''];
      for (const x of f.samples) {
        expect(
          suffixes.map((sfx) => f.name + sfx),
          `${x.name} belongs to ${f.name}`,
        ).toContain(x.name);
        const names = x.labels.map(([k]) => k);
        // An empty value is the same as no label to a query: a series names what it has.
        for (const [k, v] of x.labels) expect(v, `${k} of ${x.name}`).not.toBe('');
        for (const k of names) {
          expect(k, `label of ${x.name}`).toMatch(LABEL);
          expect(k, `label of ${x.name}`).not.toMatch(/^__/);
        }
        expect(new Set(names).size, `labels of ${x.name} are distinct`).toBe(names.length);
        expect(names.includes('le'), `le only on histogram buckets: ${x.name}`).toBe(x.name === `${f.name}_bucket`);
        const key = `${x.name}{${x.labels
          .map(([k, v]) => `${k}=${v}`)
          .sort()
          .join(',')}}`;
        expect(seen.has(key), `one sample per series: ${key}`).toBe(false);
        seen.add(key);
      }
      if (f.type === 'histogram') {
        // Per series: buckets that only grow, ending at +Inf equal to _count.
        const series = new Map<string, { le: string; v: number }[]>();
        for (const x of f.samples.filter((x) => x.name.endsWith('_bucket'))) {
          const id = x.labels
            .filter(([k]) => k !== 'le')
            .map((l) => l.join('='))
            .join(',');
          if (!series.has(id)) series.set(id, []);
          series.get(id)!.push({ le: x.labels.find(([k]) => k === 'le')![1], v: Number(x.value) });
        }
        for (const [id, buckets] of series) {
          expect(buckets.at(-1)!.le, `${f.name}{${id}} ends at +Inf`).toBe('+Inf');
          for (let i = 1; i < buckets.length; i++) expect(buckets[i].v).toBeGreaterThanOrEqual(buckets[i - 1].v);
          const count = f.samples.find(
            (x) => x.name === `${f.name}_count` && x.labels.map((l) => l.join('=')).join(',') === id,
          );
          expect(Number(count?.value), `${f.name}_count{${id}}`).toBe(buckets.at(-1)!.v);
        }
      }
    }
  });
});
