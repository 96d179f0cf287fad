import { configDefaults, defineConfig } from 'vitest/config';

// The PostgreSQL tests (`npm run test:pg`): test/pg/, test/cluster/ (several msgd on one
// PostgreSQL), test/both/ (which `npm test` runs on SQLite) on PostgreSQL, and the suites of
// `npm test` that run msgd through startTestServer (test/helpers/server.ts, which gives each
// server a database of its own here), against one cluster the global setup starts for the run
// (test/pg/global-setup.ts; MSGD_TEST_PG_URL uses a running server instead).

/** `npm test`'s suites that run here too, msgd on PostgreSQL. */
const onBothStores: string[] = [];

/** Files of those suites that measure what only SQLite has (the data directory, its file), each with why. */
const sqliteOnly: string[] = [];

export default defineConfig({
  test: {
    root: '.',
    include: ['test/pg/**/*.test.ts', 'test/cluster/**/*.test.ts', 'test/both/**/*.test.ts', ...onBothStores],
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
