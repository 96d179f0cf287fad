import { afterEach, describe, expect, it } from 'vitest';
import { serverStore, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { sql } from '../../src/db/sql.js';

// /healthz says the process answers; /readyz says whether msgd can keep what it accepts:
// the database takes a write, the migrations are current, the disk has room above the floor
// (SQLite's data directory; a PostgreSQL server's disk is its own to watch).

let s: TestServer | undefined;
afterEach(async () => {
  await s?.stop();
  s = undefined;
});

describe('health', () => {
  it('/healthz and /readyz answer 200 on a working msgd, /readyz with each check', async () => {
    s = await startTestServer();
    const live = await fetch(`${s.url}/healthz`);
    expect(live.status).toBe(200);
    expect(await live.json()).toMatchObject({ status: 'ok', version: s.rt.version });
    const ready = await fetch(`${s.url}/readyz`);
    expect(ready.status).toBe(200);
    const body = await ready.json();
    expect(body.status).toBe('ready');
    expect(Object.keys(body.checks).sort()).toEqual(
      serverStore === 'postgres' ? ['database', 'migrations'] : ['database', 'disk', 'migrations'],
    );
    expect(Object.values(body.checks).every((c: any) => c.ok === true)).toBe(true);
    // The probe leaves nothing behind.
    expect(await s.ctx.store.get(sql`SELECT * FROM meta WHERE key = 'readyz_probe'`)).toBeUndefined();
  });

  // The floor is the data directory's disk, which only SQLite has.
  it.skipIf(serverStore === 'postgres')(
    '/readyz is 503 not_ready with Retry-After when the disk is under health.minFreeDiskMb',
    async () => {
      s = await startTestServer({ 'health.minFreeDiskMb': 1024 * 1024 * 1024 });
      const r = await fetch(`${s.url}/readyz`);
      expect(r.status).toBe(503);
      expect(r.headers.get('retry-after')).toBe('30');
      const body = await r.json();
      expect(body.error.code).toBe('not_ready');
      expect(body.error.details).toEqual([
        { field: 'disk', message: expect.stringContaining('under the floor of 1073741824 MB (health.minFreeDiskMb)') },
      ]);
      // Alive all the same: a supervisor must not restart msgd over a full disk.
      expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
    },
  );

  it('/readyz is 503 when the database lacks a migration this msgd knows', async () => {
    s = await startTestServer();
    // An answer from before the change may be reused within the second; then it is looked at again.
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    await s.ctx.store.run(
      sql`DELETE FROM __drizzle_migrations WHERE created_at = (SELECT MAX(created_at) FROM __drizzle_migrations)`,
    );
    s.clock.advance(1_000);
    // On PostgreSQL a probe in the background looks again about once a second.
    const r = await waitFor(
      async () => {
        const r = await fetch(`${s!.url}/readyz`);
        return r.status === 503 ? r : null;
      },
      '/readyz to answer 503',
      5_000,
    );
    expect(r.status).toBe(503);
    const body = await r.json();
    expect(body.error.details.map((d: { field: string }) => d.field)).toEqual(['migrations']);
    expect(body.error.details[0].message).toMatch(/^pending migrations: 00\d\d_/);
  });
});
