import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DEPENDENCY_RULE, TOP_FILES, docBlock, floors, render } from '../scripts/layering.mjs';

// The dependency rule of docs/architecture.md, checked over every import in src/ (type-only
// imports and dynamic import() included): a folder that must not know another fails here
// with the file and the import that breaks the rule. The rule itself is the table in
// scripts/layering.mjs, from which the docs' picture is drawn.

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return files(p);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

interface Import {
  /** The importing file, relative to src/. */
  file: string;
  /** A file under src/ (relative to it, no extension), or a package name. */
  target: string;
  local: boolean;
}

const IMPORT =
  /(?:^|[\s;}])(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

function importsOf(path: string): Import[] {
  const text = readFileSync(path, 'utf8');
  const file = relative(SRC, path);
  const out: Import[] = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2];
    if (spec.startsWith('.')) {
      const target = relative(SRC, resolve(dirname(path), spec)).replace(/\.(js|jsx|ts|tsx)$/, '');
      out.push({ file, target, local: true });
    } else {
      const parts = spec.replace(/^node:/, 'node:').split('/');
      out.push({ file, target: spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0], local: false });
    }
  }
  return out;
}

const ALL = files(SRC).flatMap(importsOf);
const folderOf = (p: string) => (p.includes('/') ? p.split('/')[0] : p);
const from = (folder: string) => ALL.filter((i) => folderOf(i.file) === folder);
const show = (xs: Import[]) => xs.map((i) => `${i.file} imports ${i.target}`);

describe('the dependency rule', () => {
  it('reads the imports (a check that found none would pass anything)', () => {
    expect(from('core').length).toBeGreaterThan(50);
    expect(ALL.some((i) => i.file === 'cli/tui.ts' && i.target === 'tui/main')).toBe(true);
    expect(ALL.some((i) => i.file === 'db/open.ts' && !i.local && i.target === 'better-sqlite3')).toBe(true);
  });

  it('only src/db/pg imports pg, the PostgreSQL driver', () => {
    expect(ALL.some((i) => i.file.startsWith('db/pg/') && !i.local && i.target === 'pg')).toBe(true);
    const outside = ALL.filter((i) => !i.local && /^pg(-|$)/.test(i.target) && !i.file.startsWith('db/pg/'));
    expect(show(outside)).toEqual([]);
  });

  it('core imports no queue, jobs, providers, webhooks (in or out) or surface, and no fastify, commander, ink or react', () => {
    const above = [
      'queue',
      'jobs',
      'providers',
      'webhooks-in',
      'webhooks-out',
      'http',
      'ui',
      'cli',
      'tui',
      'runtime',
      'server',
      'msgd-main',
    ];
    const packages = ['fastify', 'commander', 'ink', 'react', 'undici', 'nodemailer'];
    const bad = from('core').filter((i) =>
      i.local
        ? above.includes(folderOf(i.target))
        : packages.some((p) => i.target === p || i.target.startsWith(`@${p}`)),
    );
    expect(show(bad)).toEqual([]);
  });

  it('the TUI never imports msgctl, and takes the operator operations on the queue from jobs/', () => {
    expect(show(from('tui').filter((i) => i.local && folderOf(i.target) === 'cli'))).toEqual([]);
    const tui = from('tui').map((i) => i.target);
    expect(tui).toContain('jobs/dead-jobs');
    expect(tui).toContain('webhooks-in/reprocess');
    // No queue write of its own: what it writes to the queue goes through jobs/.
    const queueUse = files(join(SRC, 'tui'))
      .filter((p) => /new JobQueue|\.retryDead\(|enqueue\w*\(/.test(readFileSync(p, 'utf8')))
      .map((p) => relative(SRC, p));
    expect(queueUse).toEqual([]);
  });

  it("msgctl's retry and reprocess commands keep only arguments and output", () => {
    for (const f of ['cli/jobs.ts', 'cli/webhooks-in.ts']) {
      const text = readFileSync(join(SRC, f), 'utf8');
      expect(text, f).not.toMatch(/\.retryDead\(|enqueue\w*\(|reopenWebhookLog/);
    }
  });
});

describe('msgctl and its console', () => {
  // SQL, or the handle to run it on: a method of the connection or a statement, or the
  // statement cache. A regular expression's exec() is not SQL.
  const SQL = [
    /\bstmt\s*[<(]/,
    /\brawStmt\s*\(/,
    /\.prepare\s*\(/,
    /(?<!\/[dgimsuy]*)\.exec\s*\(/,
    /\.pragma\s*\(/,
    /\.(sqlite|orm)\b/,
  ];

  it('run no SQL: they read and write through functions of core, queue, jobs, webhooks and db', () => {
    const sources = ['cli', 'tui'].flatMap((d) => files(join(SRC, d)));
    expect(sources.length).toBeGreaterThan(40);
    const bad = sources.flatMap((p) =>
      readFileSync(p, 'utf8')
        .split('\n')
        .filter((l) => !/^\s*(\/\/|\*|\/\*)/.test(l) && SQL.some((re) => re.test(l)))
        .map((l) => `${relative(SRC, p)}: ${l.trim()}`),
    );
    expect(bad).toEqual([]);
    const imports = [...from('cli'), ...from('tui')].filter(
      (i) => (i.local && i.target === 'db/stmt') || (!i.local && /^(better-sqlite3|drizzle-orm)$/.test(i.target)),
    );
    expect(show(imports)).toEqual([]);
  });

  it('the check finds SQL where there is some', () => {
    const caught = (line: string) => SQL.some((re) => re.test(line));
    expect(caught("const r = stmt<[string], Row>(ctx.db.sqlite, 'SELECT 1')")).toBe(true);
    expect(caught("cli.ctx.db.sqlite.prepare('SELECT id FROM partners').all()")).toBe(true);
    expect(caught("rawStmt(db, 'SELECT 1')")).toBe(true);
    expect(caught("dd.db.sqlite.pragma('quick_check')")).toBe(true);
    expect(caught("db.exec('DELETE FROM jobs')")).toBe(true);
    expect(caught('const csi = /^\\x1b+([0-9;]*)$/.exec(seq);')).toBe(false);
    expect(caught('Number(/^v(\\d+)\\./i.exec(v)?.[1])')).toBe(false);
  });
});

/** The entry of src/ a path belongs to: its top folder, or a top-level file without its extension. */
const entryOf = (p: string) => folderOf(p).replace(/\.tsx?$/, '');

/** Arrows between entries of src/ as imported, with the imports that make each. */
function entryGraph(): Map<string, Map<string, Import[]>> {
  const graph = new Map<string, Map<string, Import[]>>();
  for (const i of ALL.filter((x) => x.local)) {
    const [a, b] = [entryOf(i.file), entryOf(i.target)];
    if (a === b) continue;
    const out = graph.get(a) ?? graph.set(a, new Map()).get(a)!;
    (out.get(b) ?? out.set(b, []).get(b)!).push(i);
  }
  return graph;
}

/** Circles among the entries, each as a path back to its start: at least one wherever there is a circle. */
function circles(graph: Map<string, Map<string, Import[]>>): string[][] {
  const found: string[][] = [];
  const done = new Set<string>();
  for (const start of [...graph.keys()].sort()) {
    if (done.has(start)) continue;
    // A path from start back to start, if there is one (breadth first: the shortest).
    const back = new Map<string, string>();
    const queue = [start];
    let closed: string | null = null;
    while (queue.length && closed === null) {
      const at = queue.shift()!;
      for (const next of [...(graph.get(at)?.keys() ?? [])].sort()) {
        if (next === start) {
          closed = at;
          break;
        }
        if (!back.has(next)) (back.set(next, at), queue.push(next));
      }
    }
    if (closed === null) continue;
    const path = [start];
    for (let at = closed; at !== start; at = back.get(at)!) path.splice(1, 0, at);
    path.forEach((e) => done.add(e));
    found.push([...path, start]);
  }
  return found;
}

describe('the dependency table', () => {
  it('has a row for every entry of src/, and none for an entry that is not there', () => {
    const top = readdirSync(SRC, { withFileTypes: true });
    const folders = top.filter((e) => e.isDirectory()).map((e) => e.name);
    const files = top.filter((e) => e.isFile() && /\.tsx?$/.test(e.name)).map((e) => e.name.replace(/\.tsx?$/, ''));
    expect(Object.keys(DEPENDENCY_RULE).sort()).toEqual([...folders, ...files].sort());
    expect(files.sort()).toEqual([...TOP_FILES].sort());
  });

  it('every import in src/ is one the table allows', () => {
    const bad = ALL.filter((i) => i.local)
      .filter((i) => {
        const [a, b] = [entryOf(i.file), entryOf(i.target)];
        return a !== b && !(DEPENDENCY_RULE[a] ?? []).includes(b);
      })
      .map(
        (i) =>
          `${i.file} imports ${i.target}: ${entryOf(i.file)} may import ${DEPENDENCY_RULE[entryOf(i.file)]?.join(', ') || 'nothing'}`,
      );
    expect(bad).toEqual([]);
  });

  it('lib and web import no framework of a surface (commander, ink, react; lib not fastify either)', () => {
    const surface = ['commander', 'ink', 'react', 'react-dom'];
    const bad = [
      ...from('lib').filter(
        (i) => !i.local && [...surface, 'fastify'].some((p) => i.target === p || i.target.startsWith(`@${p}`)),
      ),
      ...from('web').filter((i) => !i.local && surface.includes(i.target)),
    ];
    expect(show(bad)).toEqual([]);
  });

  it('the table itself has no circle', () => {
    expect(() => floors()).not.toThrow();
    expect(() => floors({ a: ['b'], b: ['c'], c: ['a'] })).toThrow('a → b → c → a');
  });

  it('no circle among the entries of src/ as imported, type-only imports included', () => {
    const graph = entryGraph();
    // The graph is read: the arrows the rule is about are there.
    expect(graph.get('server')?.has('ui')).toBe(true);
    expect(graph.get('ui')?.has('web')).toBe(true);
    const found = circles(graph).map((c) =>
      [
        c.join(' → '),
        ...c.slice(1).map((to, k) => `  ${c[k]} → ${to}: ${show(graph.get(c[k])!.get(to)!.slice(0, 3)).join('; ')}`),
      ].join('\n'),
    );
    expect(found).toEqual([]);
    // The check finds a circle where there is one.
    const circled = new Map([
      ['http', new Map([['ui', []]])],
      ['ui', new Map([['runtime', []]])],
      ['runtime', new Map([['http', []]])],
      ['lib', new Map()],
    ]) as Map<string, Map<string, Import[]>>;
    expect(circles(circled)).toEqual([['http', 'ui', 'runtime', 'http']]);
  });

  it('docs/architecture.md draws the table (npm run docs:layering writes it)', () => {
    expect(docBlock()).toBe(render());
  });
});

describe('one definition', () => {
  it('the channel types are listed once, in src/lib/channel-types.ts', () => {
    const listing = /'whatsapp',\s*'messenger',\s*'instagram',\s*'sms',\s*'email'/;
    const where = files(SRC)
      .filter((p) => listing.test(readFileSync(p, 'utf8')))
      .map((p) => relative(SRC, p));
    expect(where).toEqual(['lib/channel-types.ts']);
  });
});

describe('provider knowledge', () => {
  it('core names no provider kind but in the GatewayKind type: each kind is given to it (CoreCtx.gatewayKinds)', () => {
    const kindName = /['"](whatsapp_cloud|meta_messenger|meta_instagram|twilio|sendgrid|smtp)['"]/;
    const bad = files(join(SRC, 'core')).flatMap((p) =>
      readFileSync(p, 'utf8')
        .split('\n')
        .filter((l) => kindName.test(l) && !/^\s*(\/\/|\*|\/\*)/.test(l))
        .map((l) => `${relative(SRC, p)}: ${l.trim()}`),
    );
    expect(bad).toEqual([
      "core/gateway-kinds.ts: 'whatsapp_cloud' | 'meta_messenger' | 'meta_instagram' | 'twilio' | 'sendgrid' | 'smtp' | 'sandbox';",
    ]);
  });

  it('each gateway kind is specified in its provider folder', () => {
    const kinds = readdirSync(join(SRC, 'providers'), { withFileTypes: true })
      .filter((e) => e.isDirectory() && readdirSync(join(SRC, 'providers', e.name)).includes('kind.ts'))
      .map((e) => e.name)
      .sort();
    expect(kinds).toEqual([
      'meta-instagram',
      'meta-messenger',
      'sandbox',
      'sendgrid',
      'smtp',
      'twilio',
      'whatsapp-cloud',
    ]);
  });
});

describe('one query path', () => {
  // SQL outside src/db runs through stmt() or rawStmt() (src/db/stmt.ts), which prepare each
  // SQL text once per connection and keep it: a statement prepared elsewhere is a second path
  // to port to another store, and one whose mode (pluck, raw) it may set on a statement
  // another caller shares (src/db/pin.ts).
  const PREPARE = /\.prepare\s*\(/;
  const preparing = (dir: string) =>
    files(dir)
      .filter((p) => PREPARE.test(readFileSync(p, 'utf8')))
      .map((p) => relative(SRC, p));

  it('the check sees a prepare() call (src/db, which owns preparation, has some)', () => {
    expect(preparing(join(SRC, 'db'))).toContain('db/migrate.ts');
  });

  it('nothing outside src/db calls prepare()', () => {
    const bad = preparing(SRC).filter((f) => folderOf(f) !== 'db');
    expect(bad).toEqual([]);
  });
});

describe("core's messages", () => {
  it("name the field, never msgctl's flag (the TUI and the console show them too)", () => {
    const flagInText = /['"`][^'"`]*[\s(]--[a-z][a-z-]*/;
    const bad = files(join(SRC, 'core')).flatMap((p) =>
      readFileSync(p, 'utf8')
        .split('\n')
        .filter((l) => !/^\s*(\/\/|\*|\/\*)/.test(l) && flagInText.test(l))
        .map((l) => `${relative(SRC, p)}: ${l.trim()}`),
    );
    expect(bad).toEqual([]);
  });
});

describe('the message state machine', () => {
  it('every write to a message is in src/core (src/db only for migrations)', () => {
    const writes = /\b(?:UPDATE|INSERT\s+(?:OR\s+\w+\s+)?INTO|REPLACE\s+INTO|DELETE\s+FROM)\s+["`]?messages\b/i;
    const inCore = files(join(SRC, 'core')).filter((p) => writes.test(readFileSync(p, 'utf8')));
    // Proof the pattern finds them where they are.
    expect(inCore.map((p) => relative(SRC, p))).toContain('core/message-status.ts');
    const bad = files(SRC)
      .map((p) => relative(SRC, p))
      .filter((p) => !['core', 'db'].includes(folderOf(p)) && writes.test(readFileSync(join(SRC, p), 'utf8')));
    expect(bad).toEqual([]);
  });
});
