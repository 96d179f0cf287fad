import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPartner } from '../../src/core/partners.js';
import { setPrice } from '../../src/core/prices.js';
import { SettingsCache, settingsVersion } from '../../src/core/settings-version.js';
import { openDb } from '../../src/db/open.js';
import { store } from '../../src/db/query.js';
import type { CoreCtx } from '../../src/core/context.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';
import { nextTurn } from '../helpers/wait.js';

// The settings version (meta.settings_version, moved by triggers) is what lets msgd keep tokens,
// channels, gateways and prices in memory while msgctl changes still apply on the next request.
// SQLite's own: SettingsCache reads the version on the SQLite connection, synchronously, for the
// code that still runs inside SQLite's synchronous transactions; what moves the version and the
// store's cache (StoreSettingsCache) are checked on both stores in test/both/settings-version.test.ts.

let t: TestCtx;
const stored = (c: CoreCtx) =>
  (c.db.sqlite.prepare(`SELECT value FROM meta WHERE key = 'settings_version'`).get() as { value: string }).value;

beforeEach(async () => {
  t = openTestCtx();
  await createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'test');
});
afterEach(() => t.close());

describe('SettingsCache', () => {
  it('keeps a value until the version moves; another connection is seen on the next turn, this one at once', async () => {
    let loads = 0;
    const cache = new SettingsCache(t.ctx.db.sqlite, (k: string) => `${k}:${++loads}`);
    expect(cache.get('a')).toBe('a:1');
    expect(cache.get('a')).toBe('a:1');
    await nextTurn();
    expect(cache.get('a')).toBe('a:1');

    const db2 = openDb(t.ctx.db.path);
    try {
      const ctl: CoreCtx = { ...t.ctx, db: db2, store: store(db2) };
      // msgctl's change through its own connection: its store transaction ends in a later turn, which sees it.
      await setPrice(ctl, { channel: 'email', amount: 100 }, 'msgctl');
      expect(cache.get('a')).toBe('a:2');
      // Within the turn that already read the version, a change by the other connection is not read...
      db2.sqlite.prepare(`UPDATE prices SET amount = 150 WHERE channel_type = 'email'`).run();
      expect(cache.get('a')).toBe('a:2');
      // ...the next turn sees it.
      await nextTurn();
      expect(cache.get('a')).toBe('a:3');
    } finally {
      db2.close();
    }
    // A change through this connection is seen without waiting for a turn.
    expect(cache.get('a')).toBe('a:3');
    await setPrice(t.ctx, { channel: 'email', amount: 200 }, 'test');
    expect(cache.get('a')).toBe('a:4');
    expect(settingsVersion(t.ctx.db.sqlite)).toBe(stored(t.ctx));
  });
});
