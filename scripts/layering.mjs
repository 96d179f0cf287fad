// The dependency rule: which top-level entry of src/ may import which. test/layering.test.ts
// checks every import in src/ against this table (type-only and dynamic imports included) and
// that the docs' picture is the one drawn here; `npm run docs:layering` writes that picture
// into docs/architecture.md, "Code layout".
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Each entry of src/ (a folder, or a file without its extension) and the entries it may
 * import besides itself. Nothing else: a new folder needs a row before anything may import it.
 * @type {Record<string, string[]>}
 */
export const DEPENDENCY_RULE = {
  lib: [],
  config: ['lib'],
  db: ['lib', 'config'],
  // The job engine knows nothing of the domain: a job's payload is the caller's business.
  queue: ['lib', 'db'],
  // The domain: plain functions over the database. No queue (the accept transaction is handed
  // its enqueue), no provider wire formats, no surface.
  core: ['lib', 'config', 'db'],
  // Wire formats: no database, no queue.
  providers: ['lib', 'config', 'core'],
  // What the two HTTP surfaces share (error answer, logger, cursor pages).
  web: ['lib', 'config', 'db'],
  'webhooks-out': ['lib', 'config', 'db', 'queue', 'core'],
  jobs: ['lib', 'config', 'db', 'queue', 'core', 'providers'],
  'webhooks-in': ['lib', 'config', 'db', 'queue', 'core', 'providers', 'jobs'],
  // The composition root of the work, not of the surfaces: nothing below it imports it.
  runtime: ['lib', 'config', 'db', 'queue', 'core', 'providers', 'jobs', 'webhooks-in', 'webhooks-out'],
  http: ['lib', 'config', 'db', 'queue', 'core', 'providers', 'jobs', 'webhooks-in', 'webhooks-out', 'web'],
  ui: ['lib', 'config', 'queue', 'core', 'webhooks-out', 'web'],
  tui: ['lib', 'config', 'db', 'queue', 'core', 'providers', 'jobs', 'webhooks-in', 'webhooks-out'],
  cli: ['lib', 'config', 'db', 'queue', 'core', 'providers', 'jobs', 'webhooks-in', 'webhooks-out', 'tui'],
  server: ['lib', 'config', 'db', 'core', 'jobs', 'runtime', 'http', 'ui', 'web'],
  'msgd-main': ['lib', 'config', 'db', 'server'],
};

/** Files at the top of src/, named in the table without their extension. */
export const TOP_FILES = ['runtime', 'server', 'msgd-main'];

/** Each entry's floor: one above the highest entry it may import (lib is 0). Throws on a circle. */
export function floors(rule = DEPENDENCY_RULE) {
  const floor = new Map();
  const visiting = new Set();
  const visit = (entry, path) => {
    if (floor.has(entry)) return floor.get(entry);
    if (visiting.has(entry)) throw new Error(`the dependency rule has a circle: ${[...path, entry].join(' → ')}`);
    if (!(entry in rule)) throw new Error(`${path.at(-1)} may import ${entry}, which has no row`);
    visiting.add(entry);
    const below = rule[entry].filter((e) => e !== entry).map((e) => visit(e, [...path, entry]));
    visiting.delete(entry);
    const f = below.length === 0 ? 0 : Math.max(...below) + 1;
    floor.set(entry, f);
    return f;
  };
  for (const entry of Object.keys(rule)) visit(entry, []);
  return floor;
}

/** The picture in docs/architecture.md: one line per entry, highest floor first. */
export function render(rule = DEPENDENCY_RULE) {
  const floor = floors(rule);
  const order = Object.keys(rule);
  const byFloor = (a, b) => floor.get(b) - floor.get(a) || order.indexOf(a) - order.indexOf(b);
  const name = (e) => (TOP_FILES.includes(e) ? `${e}.ts` : `${e}/`);
  const width = Math.max(...order.map((e) => name(e).length));
  const lines = [...order].sort(byFloor).map((e) => {
    const may = [...rule[e]].sort(byFloor).map(name);
    return `${String(floor.get(e)).padStart(2)}  ${name(e).padEnd(width)}  → ${may.join(' ') || '(nothing)'}`;
  });
  return ['```', ...lines, '```'].join('\n');
}

export const DOC = fileURLToPath(new URL('../docs/architecture.md', import.meta.url));
const BEGIN = '<!-- dependency-rule: written by npm run docs:layering from scripts/layering.mjs -->';
const END = '<!-- /dependency-rule -->';

/** The block between the markers in docs/architecture.md. */
export function docBlock(text = readFileSync(DOC, 'utf8')) {
  const a = text.indexOf(BEGIN);
  const b = text.indexOf(END);
  if (a < 0 || b < a) throw new Error(`docs/architecture.md has no ${BEGIN} … ${END} block`);
  return text.slice(a + BEGIN.length, b).trim();
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = readFileSync(DOC, 'utf8');
  docBlock(text);
  const a = text.indexOf(BEGIN) + BEGIN.length;
  writeFileSync(DOC, `${text.slice(0, a)}\n${render()}\n${text.slice(text.indexOf(END))}`);
  process.stdout.write(`docs/architecture.md: the dependency rule written\n`);
}
