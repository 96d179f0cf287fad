import { configDefaults, defineConfig } from 'vitest/config';

// The PostgreSQL tests (`npm run test:pg`): test/pg/, test/cluster/ (several msgd on one
// PostgreSQL) and test/both/ (which `npm test` runs on SQLite) on PostgreSQL; with
// `npm run test:pg:all`, also the suites of `npm test` listed below, which run msgd through
// startTestServer (test/helpers/server.ts, which gives each server a database of its own here)
// or as a child (test/e2e/child.ts). All against one cluster the global setup starts for the
// run (test/pg/global-setup.ts; MSGD_TEST_PG_URL uses a running server instead).

/**
 * `npm test`'s suites that run on PostgreSQL too: `npm run test:pg:all` (MSGD_TEST_PG_ALL=1) adds
 * them to the run (about 200 files, some 11 minutes on two cores); `npm run test:pg`, which CI
 * runs, is the store's own tests above and `inCi` below.
 */
const onBothStores: string[] = [
  // test/e2e: msgd children get the database through MSGD_DATABASE_URL and MSGD_MASTER_KEY (test/e2e/child.ts).
  'test/e2e/dispatch-*.test.ts',
  'test/e2e/failover-crash.test.ts',
  'test/e2e/shutdown*.test.ts',
  // test/webhooks-in, test/webhooks-out: provider webhooks in, partner webhooks out.
  'test/webhooks-in/**/*.test.ts',
  'test/webhooks-out/**/*.test.ts',
  // test/http, test/v1, test/ops: the send API and HTTP envelope, the partner API, metrics and logs.
  'test/http/**/*.test.ts',
  'test/v1/**/*.test.ts',
  'test/ops/**/*.test.ts',
  // The operator's surfaces: the web console, the TUI, msgctl.
  'test/ui/**/*.test.ts',
  'test/tui/**/*.test.{ts,tsx}',
  // test/core: msgd's work counters and heartbeat, read back through the store.
  'test/core/counters.test.ts',
  // test/queue: the durable queue, its worker and cron on the run's store (test/queue/helpers.ts), PostgreSQL's claim included.
  'test/queue/**/*.test.ts',
  // test/e2e: failover between gateways and a log output that cannot be written, over msgd on either store.
  'test/e2e/failover.test.ts',
  'test/e2e/log-output.test.ts',
  // test/cli: msgctl reaches the run's store through cliStore() (test/helpers/cli.ts) or a server's storeEnv.
  'test/cli/**/*.test.ts',
  // test/e2e, gateway lines: rate shaping, lines kept across a restart, provider outages.
  'test/e2e/rate-and-outage.test.ts',
];

/**
 * Of those, what `npm run test:pg` (and so CI) runs on PostgreSQL too, where the two stores could
 * part ways over money, messages and events: the send API (the accept, idempotency, the
 * overspend race), the queue and its worker, and partner webhooks out. The rest of the list
 * costs more time than CI's bound leaves.
 */
const inCi: string[] = ['test/http/**/*.test.ts', 'test/queue/**/*.test.ts', 'test/webhooks-out/**/*.test.ts'];

/** Files of those suites that measure what only SQLite has (the data directory, its file), each with why. */
const sqliteOnly: string[] = [
  // test/e2e:
  // `msgctl backup` / `restore` copy the data directory's SQLite file.
  'test/e2e/backup.test.ts',
  // kill -9 then recovery of the SQLite file and its lock; test/pg/crash.test.ts is the same load on PostgreSQL.
  'test/e2e/crash.test.ts',
  'test/e2e/crash-scheduled.test.ts',
  // The data directory's instance lock (a second msgd refused, a stale lock taken over).
  'test/e2e/instance.test.ts',
  // A full disk under the SQLite file (prlimit on msgd.db and its WAL).
  'test/e2e/storage-full.test.ts',
  // The key file beside a data directory and its files' owners; test/pg/msgd-store.test.ts checks the key on PostgreSQL.
  'test/e2e/master-key.test.ts',
  // The first start's empty data directory, one msgd may not write, and a config error before any store opens.
  'test/e2e/startup-output.test.ts',
  // What a real terminal does to `msgctl tui` over a data directory; test/tui runs the console on PostgreSQL.
  'test/e2e/tui-pty.test.ts',
  'test/e2e/tui-terminal.test.ts',
  // A clone without dist/: no store is opened at all.
  'test/e2e/unbuilt.test.ts',
  // The operator's surfaces: the web console, the TUI, msgctl.
  // SQLite's query plans (EXPLAIN QUERY PLAN) of the console's reads.
  'test/tui/cost.test.tsx',
  // test/cli: `msgctl backup` / `restore` and the backup before migrations copy the data directory's SQLite
  // file; test/pg/msgctl-store.test.ts checks that both refuse on PostgreSQL, naming pg_dump / pg_restore.
  'test/cli/backup.test.ts',
];

export default defineConfig({
  test: {
    root: '.',
    include: [
      'test/pg/**/*.test.ts',
      'test/cluster/**/*.test.ts',
      'test/both/**/*.test.ts',
      ...(process.env.MSGD_TEST_PG_ALL === '1' ? onBothStores : inCi),
    ],
    exclude: [...configDefaults.exclude, ...sqliteOnly],
    // test/global-setup.ts compiles dist/ for the tests that run bin/msgctl.
    globalSetup: ['test/global-setup.ts', 'test/pg/global-setup.ts'],
    // test/both/helpers.ts opens its contexts on this store.
    env: { MSGD_TEST_STORE: 'postgres' },
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores, shared by the tests and the server.
    maxWorkers: 2,
  },
});
