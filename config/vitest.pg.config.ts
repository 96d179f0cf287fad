import { defineConfig } from 'vitest/config';

// The PostgreSQL tests (`npm run test:pg`): test/pg/, test/cluster/ (several msgd on one
// PostgreSQL), and test/both/ (which `npm test` runs on SQLite) on PostgreSQL, against one cluster the global setup starts for the run
// (test/pg/global-setup.ts; MSGD_TEST_PG_URL uses a running server instead).
export default defineConfig({
  test: {
    root: '.',
    include: ['test/pg/**/*.test.ts', 'test/cluster/**/*.test.ts', 'test/both/**/*.test.ts'],
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
