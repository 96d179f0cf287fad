import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenAuthenticator } from '../../src/core/tokens.js';
import { sql } from '../../src/db/sql.js';
import { type CliStore, cliStore, runCli, runJson, type RunOptions } from '../helpers/cli.js';

// Changes an operator makes after the first session, checked in the database and, where
// it matters, through core the way the server would see them on its next request.

let store: CliStore;
const run = (args: string[], opts: RunOptions = {}) => runCli(args, store.opts(opts));
const json = (args: string[], opts: RunOptions = {}) => runJson(args, store.opts(opts));

function authenticate(secret: string) {
  return store.withCtx((ctx) => new TokenAuthenticator(ctx).authenticate(secret));
}

let secret = '';
let tokenId = '';

beforeAll(async () => {
  store = await cliStore();
  await json(['partner', 'create', 'acme', '--name', 'Acme Ltd']);
  const t = await json(['token', 'issue', 'acme', '--name', 'prod', '--scopes', 'messages:send']);
  secret = t.secret;
  tokenId = t.id;
});
afterAll(() => store.drop());

describe('partners', () => {
  it('suspend refuses the partner on the next request; activate lets it back', async () => {
    expect((await authenticate(secret)).ok).toBe(true);
    const s = await run(['partner', 'suspend', 'acme']);
    expect(s.code).toBe(0);
    expect(s.stdout).toMatch(/status\s+suspended/);
    expect(await authenticate(secret)).toMatchObject({ ok: false, reason: 'partner_suspended' });
    expect((await json(['partner', 'activate', 'acme'])).status).toBe('active');
    expect((await authenticate(secret)).ok).toBe(true);
    const actions = await store.withCtx((ctx) =>
      ctx.store.all<{ action: string; actor: string }>(
        sql`SELECT action, actor FROM audit_log WHERE action LIKE 'partner.%' ORDER BY id`,
      ),
    );
    expect(actions.map((a) => a.action)).toEqual(['partner.create', 'partner.suspend', 'partner.activate']);
    expect(actions.every((a) => /^cli:\S+$/.test(a.actor))).toBe(true);
  });

  it('set-credit and set-limits', async () => {
    expect((await json(['partner', 'set-credit', 'acme', '25.50'])).credit_limit).toEqual({
      micro: 25_500_000,
      amount: '25.50',
      currency: 'USD',
    });
    const p = await json(['partner', 'set-limits', 'acme', '--rate-limit', '120', '--low-balance', '10']);
    expect(p.rate_limit_per_minute).toBe(120);
    expect(p.low_balance_threshold.micro).toBe(10_000_000);
    const back = await json(['partner', 'set-limits', 'acme', '--rate-limit', 'default']);
    expect(back.rate_limit_per_minute).toBeNull();
    // A limit left out keeps its value.
    expect(back.low_balance_threshold.micro).toBe(10_000_000);
    const none = await run(['partner', 'set-limits', 'acme']);
    expect(none.code).toBe(2);
  });

  it('list as a table and as JSON', async () => {
    await json(['partner', 'create', 'globex', '--name', 'Globex', '--currency', 'eur', '--credit', '5']);
    const r = await run(['partner', 'list']);
    expect(r.stdout.split('\n')[0]).toMatch(/^SLUG\s+NAME\s+STATUS\s+BALANCE\s+CREDIT\s+AVAILABLE\s+ID$/);
    expect(r.stdout).toMatch(/globex\s+Globex\s+active\s+0\.00 EUR\s+5\.00 EUR\s+5\.00 EUR/);
    const j = await json(['partner', 'list']);
    expect(j.data.map((p: any) => p.slug)).toEqual(['acme', 'globex']);
  });
});

describe('money', () => {
  it('adjusts by a negative amount given plainly or after --', async () => {
    await json(['balance', 'topup', 'acme', '10.00']);
    const a = await json(['balance', 'adjust', 'acme', '-5.00', '--note', 'duplicate top-up']);
    expect(a.entry).toMatchObject({
      kind: 'adjustment',
      amount: { micro: -5_000_000, amount: '-5.00' },
      note: 'duplicate top-up',
    });
    const b = await json(['balance', 'adjust', 'acme', '--note', 'goodwill', '--', '-0.25']);
    expect(b.entry.amount.micro).toBe(-250_000);
    expect(b.partner.balance.micro).toBe(4_750_000);
    const show = await run(['balance', 'show', 'acme']);
    expect(show.stdout).toMatch(/balance\s+4\.75 USD/);
    expect(show.stdout).toMatch(/available\s+30\.25 USD/); // 4.75 + 25.50 credit
  });

  it('an adjustment may take the balance below zero, within or beyond credit (it is audited)', async () => {
    const j = await json(['balance', 'adjust', 'acme', '-50', '--note', 'chargeback']);
    expect(j.partner.balance.micro).toBe(-45_250_000);
    const ledger = await json(['ledger', 'list', 'acme', '--limit', '2']);
    expect(ledger.data.map((e: any) => e.note)).toEqual(['chargeback', 'goodwill']);
    expect(ledger.next_before).toBe(ledger.data[1].id);
    const older = await json(['ledger', 'list', 'acme', '--before', String(ledger.next_before)]);
    expect(older.data.map((e: any) => e.kind)).toEqual(['adjustment', 'topup']);
  });
});

describe('tokens', () => {
  it('revoke by prefix refuses the token from the next request; list shows it revoked', async () => {
    const second = await json(['token', 'issue', 'acme', '--name', 'ci', '--scopes', '*', '--expires', '12h']);
    expect(Date.parse(second.expires_at) - Date.now()).toBeGreaterThan(11.9 * 3_600_000);
    const r = await run(['token', 'revoke', second.prefix, '--yes']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Revoked token "ci"');
    expect(await authenticate(second.secret)).toMatchObject({ ok: false, reason: 'revoked' });
    expect((await authenticate(secret)).ok).toBe(true);
    const list = await json(['token', 'list', 'acme']);
    expect(Object.fromEntries(list.data.map((t: any) => [t.name, t.state]))).toEqual({ ci: 'revoked', prod: 'active' });
    const again = await run(['token', 'revoke', second.id, '--yes']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already revoked/);
  });

  it('revoke by id', async () => {
    expect((await json(['token', 'revoke', tokenId, '--yes'])).state).toBe('revoked');
    expect(await authenticate(secret)).toMatchObject({ ok: false, reason: 'revoked' });
  });
});

describe('gateways, channels and prices', () => {
  it('coerces --set values by the kind schema, including false', async () => {
    const g = await json([
      'gateway',
      'add',
      'smtp',
      '--name',
      'relay',
      '--set',
      'host=smtp.example.com',
      '--set',
      'port=2525',
      '--set',
      'secure=false',
      '--set',
      'require_tls=yes',
    ]);
    expect(g.settings).toMatchObject({ host: 'smtp.example.com', port: 2525, secure: false, require_tls: true });
    expect(g.webhook_url).toBeNull();
    const sb = await json([
      'gateway',
      'add',
      'sandbox',
      '--name',
      'demo',
      '--set',
      'delivery_delay_ms=100',
      '--set',
      'rate_per_second=2.5',
    ]);
    expect(sb.settings).toEqual({ delivery_delay_ms: 100, rate_per_second: 2.5 });
    expect(sb.secret_names).toEqual(['signing_secret']);
  });

  it('update rotates a secret from an env var, unsets one, disables and enables', async () => {
    const env = { WA_TOKEN: 'wa-token-1', WA_APP: 'wa-app-secret-1' };
    const wa = await json(
      [
        'gateway',
        'add',
        'whatsapp_cloud',
        '--name',
        'wa',
        '--set',
        'phone_number_id=1234567890',
        '--secret-env',
        'access_token=WA_TOKEN',
        '--secret-env',
        'app_secret=WA_APP',
      ],
      { env },
    );
    expect(wa.secret_names).toEqual(['access_token', 'app_secret']);
    expect((await json(['gateway', 'update', 'wa', '--unset-secret', 'app_secret', '--yes'])).secret_names).toEqual([
      'access_token',
    ]);
    const upd = await json(['gateway', 'update', 'wa', '--secret-stdin', 'verify_token', '--disable'], { stdin: 'vt' });
    expect(upd).toMatchObject({ status: 'disabled', secret_names: ['access_token', 'verify_token'] });
    expect((await json(['gateway', 'update', 'wa', '--enable'])).status).toBe('active');
    const missing = await run(['gateway', 'update', 'wa', '--unset-secret', 'access_token', '--yes']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/access_token: required secret/);
    const nothing = await run(['gateway', 'update', 'wa']);
    expect(nothing.code).toBe(2);
  });

  it('--unset removes a setting (back to its default) so a gateway can be switched back without re-adding it', async () => {
    const env = { FB_TOKEN: 'page-token-1' };
    const fb = await json(
      [
        'gateway',
        'add',
        'meta_messenger',
        '--name',
        'fb',
        '--set',
        'page_id=123',
        '--set',
        'messaging_type=MESSAGE_TAG',
        '--set',
        'tag=HUMAN_AGENT',
        '--set',
        'api_version=v22.0',
        '--secret-env',
        'page_access_token=FB_TOKEN',
      ],
      { env },
    );
    expect(fb.settings).toMatchObject({ messaging_type: 'MESSAGE_TAG', tag: 'HUMAN_AGENT', api_version: 'v22.0' });
    const back = await json([
      'gateway',
      'update',
      'fb',
      '--set',
      'messaging_type=RESPONSE',
      '--unset',
      'tag',
      '--unset',
      'api_version',
    ]);
    expect(back.settings).toMatchObject({ messaging_type: 'RESPONSE', api_version: 'v26.0' });
    expect(back.settings).not.toHaveProperty('tag');
    // Unsetting the tag alone would leave MESSAGE_TAG without one: refused, nothing changed.
    await json(['gateway', 'update', 'fb', '--set', 'messaging_type=MESSAGE_TAG', '--set', 'tag=ACCOUNT_UPDATE']);
    const lone = await run(['gateway', 'update', 'fb', '--unset', 'tag']);
    expect([lone.code, lone.stderr]).toEqual([1, expect.stringMatching(/tag: messaging_type MESSAGE_TAG needs a tag/)]);
    const both = await run(['gateway', 'update', 'fb', '--set', 'tag=HUMAN_AGENT', '--unset', 'tag']);
    expect([both.code, both.stderr]).toEqual([1, expect.stringMatching(/both set and unset: tag/)]);
    const inherited = await run(['gateway', 'update', 'fb', '--unset', 'toString']);
    expect([inherited.code, inherited.stderr]).toEqual([1, expect.stringMatching(/has no setting toString/)]);
    const typo = await run(['gateway', 'update', 'fb', '--unset', 'tagg']);
    expect([typo.code, typo.stderr]).toEqual([1, expect.stringMatching(/has no setting tagg/)]);
    const required = await run(['gateway', 'update', 'fb', '--unset', 'page_id']);
    expect(required.code).toBe(1);
    expect((await json(['gateway', 'show', 'fb'])).settings).toMatchObject({
      page_id: '123',
      messaging_type: 'MESSAGE_TAG',
      tag: 'ACCOUNT_UPDATE',
    });
    await json(['gateway', 'remove', 'fb', '--yes']);
  });

  it('a Twilio API key needs its secret: a gateway that would fail every send is refused', async () => {
    const env = { TW_TOKEN: 'auth-token-1', TW_KEY: 'key-secret-1' };
    const args = [
      'gateway',
      'add',
      'twilio',
      '--name',
      'tw-key',
      '--set',
      'account_sid=AC123',
      '--set',
      'api_key_sid=SK123',
      '--secret-env',
      'auth_token=TW_TOKEN',
    ];
    const bare = await run(args, { env });
    expect([bare.code, bare.stderr]).toEqual([
      1,
      expect.stringMatching(/api_key_secret: required with the settings given/),
    ]);
    const tw = await json([...args, '--secret-env', 'api_key_secret=TW_KEY'], { env });
    expect(tw.secret_names).toEqual(['api_key_secret', 'auth_token']);
    const drop = await run(['gateway', 'update', 'tw-key', '--unset-secret', 'api_key_secret', '--yes']);
    expect([drop.code, drop.stderr]).toEqual([
      1,
      expect.stringMatching(/api_key_secret: required with the settings given/),
    ]);
    expect(
      (
        await json([
          'gateway',
          'update',
          'tw-key',
          '--unset',
          'api_key_sid',
          '--unset-secret',
          'api_key_secret',
          '--yes',
        ])
      ).secret_names,
    ).toEqual(['auth_token']);
    await json(['gateway', 'remove', 'tw-key', '--yes']);
  });

  it('an SMTP password needs its user, checked when either changes; secure alone means port 465', async () => {
    const env = { SMTP_PASS: 'relay-pass-1' };
    const base = ['gateway', 'add', 'smtp', '--name', 'mx-auth', '--set', 'host=mx.example.com'];
    const passOnly = await run([...base, '--secret-env', 'password=SMTP_PASS'], { env });
    expect([passOnly.code, passOnly.stderr]).toEqual([
      1,
      expect.stringMatching(/user: required with the password secret/),
    ]);
    const ok = await json(
      [...base, '--set', 'user=relay', '--set', 'secure=true', '--secret-env', 'password=SMTP_PASS'],
      { env },
    );
    // No port stored: the adapter takes 465 for secure, 587 otherwise.
    expect(ok.settings).toEqual({
      host: 'mx.example.com',
      user: 'relay',
      secure: true,
      require_tls: false,
      tls_reject_unauthorized: true,
    });
    const dropUser = await run(['gateway', 'update', 'mx-auth', '--unset', 'user']);
    expect([dropUser.code, dropUser.stderr]).toEqual([
      1,
      expect.stringMatching(/user: required with the password secret/),
    ]);
    // A user without a password is taken: a relay that offers no AUTH is sent none.
    await json(['gateway', 'update', 'mx-auth', '--unset-secret', 'password', '--yes']);
    // A gateway stored before the rule (a password, no user) can still be disabled and changed
    // elsewhere; touching the pair asks for the fix.
    await store.withCtx((ctx) =>
      ctx.store.run(
        sql`UPDATE gateways SET settings = ${JSON.stringify({ host: 'mx.example.com', port: 587 })} WHERE name = 'mx-auth'`,
      ),
    );
    await json(['gateway', 'update', 'mx-auth', '--secret-env', 'password=SMTP_PASS', '--set', 'user=relay'], { env });
    await store.withCtx((ctx) =>
      ctx.store.run(
        sql`UPDATE gateways SET settings = ${JSON.stringify({ host: 'mx.example.com', port: 587 })} WHERE name = 'mx-auth'`,
      ),
    );
    expect((await json(['gateway', 'update', 'mx-auth', '--disable'])).status).toBe('disabled');
    expect((await json(['gateway', 'update', 'mx-auth', '--set', 'rate_per_second=5'])).settings).toMatchObject({
      rate_per_second: 5,
    });
    const rotate = await run(['gateway', 'update', 'mx-auth', '--secret-env', 'password=SMTP_PASS'], { env });
    expect([rotate.code, rotate.stderr]).toEqual([1, expect.stringMatching(/user: required with the password secret/)]);
    await json(['gateway', 'remove', 'mx-auth', '--yes']);
  });

  it('assigns, lists and unassigns channels; remove works once nothing uses the gateway', async () => {
    await json(['channel', 'assign', 'acme', 'demo', 'sms', '--from', '+15550001111']);
    const email = await json(['channel', 'assign', 'acme', 'relay', 'email', '--from', 'News@Acme.example']);
    expect(email.sender).toBe('news@acme.example');
    expect((await json(['channel', 'list', 'acme'])).data.map((c: any) => c.type)).toEqual(['email', 'sms']);
    expect((await json(['channel', 'unassign', 'acme', 'sms'])).status).toBe('inactive');
    expect((await json(['channel', 'unassign', '--id', email.id])).status).toBe('inactive');
    expect((await json(['channel', 'list'])).data).toEqual([]);
    expect((await json(['channel', 'list', '--all'])).data).toHaveLength(2);
    const r = await run(['gateway', 'remove', 'relay', '--yes']);
    expect(r.code, r.stderr).toBe(0);
    expect((await json(['gateway', 'list'])).data.map((g: any) => g.name)).toEqual(['demo', 'wa']);
  });

  it('a partner override beats the default price and can be removed', async () => {
    await json(['price', 'set', 'whatsapp', '0.02']);
    const o = await json(['price', 'set', 'whatsapp', '0.015', '--partner', 'globex']);
    expect(o).toMatchObject({
      scope: 'partner',
      partner: 'globex',
      per: 'message',
      amount: { micro: 15_000, amount: '0.015', currency: 'EUR' },
    });
    const list = await json(['price', 'list', '--partner', 'acme']);
    expect(list.data.map((p: any) => p.scope)).toEqual(['default']);
    const r = await run(['price', 'list']);
    expect(r.stdout).toMatch(/whatsapp\s+globex\s+0\.015 EUR\s+message/);
    await json(['price', 'unset', 'whatsapp', '--partner', 'globex']);
    expect((await json(['price', 'list'])).data).toHaveLength(1);
  });

  it('the audit log lists every change with its actor', async () => {
    const a = await json(['audit', 'list', '--limit', '500']);
    const actions = new Set(a.data.map((e: any) => e.action));
    for (const x of [
      'partner.create',
      'token.issue',
      'token.revoke',
      'gateway.add',
      'gateway.update',
      'gateway.remove',
      'channel.assign',
      'channel.unassign',
      'price.set',
      'price.unset',
      'balance.topup',
      'balance.adjust',
    ]) {
      expect(actions, x).toContain(x);
    }
    const text = await run(['audit', 'list', '--limit', '1']);
    expect(text.stdout.trimEnd().split('\n')).toHaveLength(2);
  });
});
