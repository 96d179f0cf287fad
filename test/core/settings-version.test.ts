import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assignChannel, unassignChannel } from '../../src/core/channels.js';
import { addGateway } from '../../src/core/gateways.js';
import { debit, topup } from '../../src/core/ledger.js';
import { createPartner, suspendPartner } from '../../src/core/partners.js';
import { setPrice } from '../../src/core/prices.js';
import { SettingsCache, settingsVersion } from '../../src/core/settings-version.js';
import { TokenAuthenticator, issueToken, revokeToken } from '../../src/core/tokens.js';
import { openDb } from '../../src/db/open.js';
import { store } from '../../src/db/query.js';
import type { CoreCtx } from '../../src/core/context.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';
import { nextTurn } from '../helpers/wait.js';

// The settings version (meta.settings_version, moved by triggers) is what lets msgd keep tokens,
// channels, gateways and prices in memory while msgctl changes still apply on the next request.

let t: TestCtx;
const stored = (c: CoreCtx) =>
  (c.db.sqlite.prepare(`SELECT value FROM meta WHERE key = 'settings_version'`).get() as { value: string }).value;

beforeEach(async () => {
  t = openTestCtx();
  await createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'test');
});
afterEach(() => t.close());

describe('settings_version', () => {
  it('moves with every change to what a request checks, and not with money or statistics', async () => {
    const moved = async (what: string, change: () => unknown) => {
      const before = stored(t.ctx);
      await change();
      expect(stored(t.ctx), what).not.toBe(before);
    };
    const still = async (what: string, change: () => unknown) => {
      const before = stored(t.ctx);
      await change();
      expect(stored(t.ctx), what).toBe(before);
    };
    let secret = '';
    await moved(
      'token issued',
      async () => (secret = (await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test')).secret),
    );
    const gw = { id: '' };
    await moved(
      'gateway added',
      async () =>
        (gw.id = (await addGateway(t.ctx, { kind: 'sandbox', name: 'sbx', settings: {}, secrets: {} }, 'test')).id),
    );
    await moved(
      'channel assigned',
      async () =>
        await assignChannel(t.ctx, { partner: 'acme', gateway: gw.id, type: 'sms', sender: '+15017250604' }, 'test'),
    );
    await moved('price set', async () => await setPrice(t.ctx, { channel: 'sms', amount: 7500 }, 'test'));
    const partnerId = (t.ctx.db.sqlite.prepare('SELECT id FROM partners').get() as { id: string }).id;
    await still('top-up', () => topup(t.ctx, partnerId, 1_000_000, null, 'test'));
    await still('debit', () => t.ctx.db.sqlite.transaction(() => debit(t.ctx, partnerId, 7500, null, 'test'))());
    await still('last_used_at', () => new TokenAuthenticator(t.ctx).authenticate(secret));
    await moved('partner suspended', () => suspendPartner(t.ctx, 'acme', 'test'));
    await moved(
      'channel unassigned',
      async () => await unassignChannel(t.ctx, { partner: 'acme', type: 'sms' }, 'test'),
    );
    await moved('token revoked', () => revokeToken(t.ctx, secret.slice(0, 16), 'test'));
  });
});

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

  it('keeps misses too: an unknown token hash costs no query until a token is issued', async () => {
    const auth = new TokenAuthenticator(t.ctx);
    const forged = 'msgd_live_' + 'x'.repeat(43);
    expect(await auth.authenticate(forged)).toEqual({ ok: false, reason: 'unknown' });
    const { secret } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test');
    expect((await auth.authenticate(secret)).ok).toBe(true);
    await revokeToken(t.ctx, secret.slice(0, 16), 'test');
    expect(await auth.authenticate(secret)).toEqual({ ok: false, reason: 'revoked' });
  });
});
