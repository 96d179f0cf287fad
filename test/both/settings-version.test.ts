import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assignChannel, unassignChannel } from '../../src/core/channels.js';
import { addGateway } from '../../src/core/gateways.js';
import { debitIn, topup } from '../../src/core/ledger.js';
import { createPartner, suspendPartner } from '../../src/core/partners.js';
import { setPrice } from '../../src/core/prices.js';
import { settingsChangedIn, storeSettingsVersion, StoreSettingsCache } from '../../src/core/settings-version.js';
import { issueToken, revokeToken, TokenAuthenticator } from '../../src/core/tokens.js';
import { sql } from '../../src/db/sql.js';
import { nextTurn } from '../helpers/wait.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The settings version on both stores: it moves when what a request checks changes (triggers on
// both), this process sees its own changes at once and another process's from the next
// event-loop turn, and the caches keyed by it are emptied when it moves.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
});
afterEach(() => t.close());

const stored = async () =>
  (await t.ctx.store.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = 'settings_version'`))!.value;

describe('settings version', () => {
  it('moves when a setting changes, and not with money', async () => {
    const moved = async (what: string, change: () => Promise<unknown>) => {
      const before = await stored();
      await change();
      expect(await stored(), what).not.toBe(before);
      // This process made the change: it reads the new version at once, in the same turn.
      expect(await storeSettingsVersion(t.ctx.store), what).toBe(await stored());
    };
    expect(await storeSettingsVersion(t.ctx.store)).toBe('0');
    await moved('partner created', () => createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'op'));
    await moved('token issued', () => issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'op'));
    await moved('price set', () => setPrice(t.ctx, { channel: 'sms', amount: 7_500 }, 'op'));
    await moved('partner suspended', () => suspendPartner(t.ctx, 'acme', 'op'));
    const before = await stored();
    await topup(t.ctx, 'acme', 1_000_000, null, 'op');
    expect(await stored(), 'top-up').toBe(before);
  });

  it('moves with every change to what a request checks, and not with money or statistics', async () => {
    await createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'test');
    const moved = async (what: string, change: () => Promise<unknown>) => {
      const before = await stored();
      await change();
      expect(await stored(), what).not.toBe(before);
    };
    const still = async (what: string, change: () => Promise<unknown>) => {
      const before = await stored();
      await change();
      expect(await stored(), what).toBe(before);
    };
    let secret = '';
    await moved(
      'token issued',
      async () => (secret = (await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test')).secret),
    );
    let gateway = '';
    await moved(
      'gateway added',
      async () =>
        (gateway = (await addGateway(t.ctx, { kind: 'sandbox', name: 'sbx', settings: {}, secrets: {} }, 'test')).id),
    );
    await moved('channel assigned', () =>
      assignChannel(t.ctx, { partner: 'acme', gateway, type: 'sms', sender: '+15017250604' }, 'test'),
    );
    await moved('price set', () => setPrice(t.ctx, { channel: 'sms', amount: 7500 }, 'test'));
    const partnerId = (await t.ctx.store.get<{ id: string }>(sql`SELECT id FROM partners`))!.id;
    await still('top-up', () => topup(t.ctx, partnerId, 1_000_000, null, 'test'));
    await still('debit', () => t.ctx.store.transaction((tx) => debitIn(tx, t.ctx, partnerId, 7500, null, 'test')));
    await still('last_used_at', () => new TokenAuthenticator(t.ctx).authenticate(secret));
    await moved('partner suspended', () => suspendPartner(t.ctx, 'acme', 'test'));
    await moved('channel unassigned', () => unassignChannel(t.ctx, { partner: 'acme', type: 'sms' }, 'test'));
    await moved('token revoked', () => revokeToken(t.ctx, secret.slice(0, 16), 'test'));
  });

  it('sees a change by another process from the next event-loop turn, reading once per turn', async () => {
    const first = await storeSettingsVersion(t.ctx.store);
    // As msgctl would, on a connection of its own: nothing in this process is told.
    await t.exec(
      `INSERT INTO partners (id, slug, name, currency, balance, credit_limit, created_at, updated_at)
       VALUES ('prt_x', 'x', 'X', 'USD', 0, 0, 0, 0)`,
    );
    await nextTurn();
    const second = await storeSettingsVersion(t.ctx.store);
    expect(second).not.toBe(first);
    expect(second).toBe(await stored());
    // Within one turn the version is read once: a change there is seen from the next turn on.
    const [a, b] = await Promise.all([storeSettingsVersion(t.ctx.store), storeSettingsVersion(t.ctx.store)]);
    expect([a, b]).toEqual([second, second]);
    await t.exec(`UPDATE partners SET name = 'Y' WHERE id = 'prt_x'`);
    await nextTurn();
    expect(await storeSettingsVersion(t.ctx.store)).toBe(await stored());
  });

  it('empties a cache when the version moves, and keeps nothing loaded across a change', async () => {
    let loads = 0;
    const cache = new StoreSettingsCache(t.ctx.store, async (k: string) => `${k}:${++loads}`);
    expect(await cache.get('a')).toBe('a:1');
    expect(await cache.get('a')).toBe('a:1');
    await createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'op');
    expect(await cache.get('a')).toBe('a:2');
    // A load during which the version moved is answered but not kept.
    const slow = new StoreSettingsCache(t.ctx.store, async (k: string) => {
      const v = `${k}:${++loads}`;
      await t.exec(`UPDATE partners SET name = 'Acme ${loads}' WHERE slug = 'acme'`);
      settingsChangedIn(t.ctx.store);
      return v;
    });
    const got = await slow.get('b');
    expect(await slow.get('b')).not.toBe(got);
  });
});

describe('TokenAuthenticator', () => {
  it('keeps misses too: an unknown token hash costs no query until a token is issued', async () => {
    await createPartner(t.ctx, { slug: 'acme', name: 'Acme' }, 'test');
    const auth = new TokenAuthenticator(t.ctx);
    const forged = 'msgd_live_' + 'x'.repeat(43);
    expect(await auth.authenticate(forged)).toEqual({ ok: false, reason: 'unknown' });
    const { secret } = await issueToken(t.ctx, { partner: 'acme', name: 'p', scopes: '*' }, 'test');
    expect((await auth.authenticate(secret)).ok).toBe(true);
    await revokeToken(t.ctx, secret.slice(0, 16), 'test');
    expect(await auth.authenticate(secret)).toEqual({ ok: false, reason: 'revoked' });
  });
});
