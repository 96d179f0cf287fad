import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    root: '.',
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
    // test/pg and test/cluster need a PostgreSQL: `npm run test:pg` (config/vitest.pg.config.ts) runs them.
    exclude: [...configDefaults.exclude, 'test/pg/**', 'test/cluster/**'],
    globalSetup: ['test/global-setup.ts'],
    // test/both/ runs here on SQLite (and on PostgreSQL under config/vitest.pg.config.ts).
    env: { MSGD_TEST_STORE: 'sqlite' },
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: running every file at once makes timing-sensitive integration tests flaky.
    maxWorkers: 2,
  },
});
