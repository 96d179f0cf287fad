import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

// /healthz says the process answers; /readyz says whether msgd can keep what it accepts:
// the database takes a write, the migrations are current, the disk has room above the floor.

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
    expect(Object.keys(body.checks).sort()).toEqual(['database', 'disk', 'migrations']);
    expect(Object.values(body.checks).every((c: any) => c.ok === true)).toBe(true);
    // The probe leaves nothing behind.
    expect(s.ctx.db.sqlite.prepare(`SELECT * FROM meta WHERE key = 'readyz_probe'`).get()).toBeUndefined();
  });

  it('/readyz is 503 not_ready with Retry-After when the disk is under health.minFreeDiskMb', async () => {
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
  });

  it('/readyz is 503 when the database lacks a migration this msgd knows', async () => {
    s = await startTestServer();
    // An answer from before the change may be reused within the second; then it is looked at again.
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200);
    s.ctx.db.sqlite.exec(
      'DELETE FROM __drizzle_migrations WHERE created_at = (SELECT MAX(created_at) FROM __drizzle_migrations)',
    );
    s.clock.advance(1_000);
    const r = await fetch(`${s.url}/readyz`);
    expect(r.status).toBe(503);
    const body = await r.json();
    expect(body.error.details.map((d: { field: string }) => d.field)).toEqual(['migrations']);
    expect(body.error.details[0].message).toMatch(/^pending migrations: 00\d\d_/);
  });
});
