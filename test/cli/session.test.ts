import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openGatewayIn } from '../../src/core/gateway-secrets.js';
import { type Sql, sql } from '../../src/db/sql.js';
import {
  type CliStore,
  cliStore,
  cliStoreKind,
  migrationTags,
  runCli,
  type CliResult,
  type RunOptions,
} from '../helpers/cli.js';

// The operator's first session from the README and msgctl --help, exactly as written there, in text and in --json.
// On PostgreSQL the session starts at a migrated database (msgctl init is the data directory's:
// test/pg/msgctl-store.test.ts checks that it refuses there and that msgctl migrate makes the schema).

const AUTH_TOKEN = 'tw-auth-7f3a9c2e5b1d4f60';

/** msgctl init and the data directory's files: SQLite's. */
const onSqlite = it.skipIf(cliStoreKind === 'postgres');

function session() {
  let store: CliStore;
  beforeAll(async () => {
    store = await cliStore({ init: false });
  });
  afterAll(() => store.drop());
  const results: { args: string[]; r: CliResult }[] = [];
  const run = async (args: string[], opts: RunOptions = {}) => {
    const r = await runCli(args, store.opts(opts));
    results.push({ args, r });
    return r;
  };
  /** The first row of a query on the session's store. */
  const row = <R = any>(q: Sql) => store.withCtx((ctx) => ctx.store.get<R>(q));
  return {
    get dataDir() {
      return store.dataDir;
    },
    get store() {
      return store;
    },
    results,
    run,
    row,
  };
}

describe('first session, text output', () => {
  const s = session();
  let secret = '';

  onSqlite('msgctl init creates the data dir, database and a 0600 key file, and is idempotent', async () => {
    const r = await s.run(['init']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Created the data directory at ${s.dataDir}`);
    expect(r.stdout).toContain(join(s.dataDir, 'msgd.db'));
    expect(statSync(join(s.dataDir, 'master.key')).mode & 0o777).toBe(0o600);
    const again = await s.run(['init']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('already exists');
  });

  it('msgctl partner create acme --name "Acme Ltd"', async () => {
    const r = await s.run(['partner', 'create', 'acme', '--name', 'Acme Ltd']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Created partner acme \(prt_/);
    expect(r.stdout).toMatch(/balance\s+0\.00 USD/);
  });

  it('msgctl token issue prints the secret once, with the warning on stderr', async () => {
    const r = await s.run(['token', 'issue', 'acme', '--name', 'prod', '--scopes', 'messages:send,messages:read']);
    expect(r.code).toBe(0);
    secret = /secret\s+(msgd_live_\S+)/.exec(r.stdout)?.[1] ?? '';
    expect(secret.length).toBeGreaterThanOrEqual('msgd_live_'.length + 43);
    expect(r.stderr).toMatch(/store the secret now.*will not be shown again/i);
    expect(r.stdout).not.toMatch(/will not be shown again/);
    const stored = await s.row(sql`SELECT hash, prefix, scopes FROM tokens`);
    expect(stored.hash).toBe(createHash('sha256').update(secret).digest('hex'));
    expect(secret.startsWith(stored.prefix)).toBe(true);
    expect(stored.scopes).toBe('messages:read messages:send');
  });

  it('msgctl token list shows prefix, scopes and state but never the secret', async () => {
    const r = await s.run(['token', 'list', 'acme']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/prod\s+msgd_live_\S{6}\s+messages:read,messages:send\s+active/);
    expect(r.stdout).not.toContain(secret);
  });

  it('echo "$AUTH_TOKEN" | msgctl gateway add twilio ... --secret-stdin auth_token', async () => {
    const r = await s.run(
      [
        'gateway',
        'add',
        'twilio',
        '--name',
        'twilio-main',
        '--set',
        'account_sid=AC123',
        '--secret-stdin',
        'auth_token',
      ],
      { stdin: `${AUTH_TOKEN}\n` },
    );
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/secrets\s+auth_token \(values never shown\)/);
    // The trailing newline from echo is not part of the stored secret.
    const opened = await s.store.withCtx(async (ctx) => {
      const { id } = (await ctx.store.get<{ id: string }>(sql`SELECT id FROM gateways`))!;
      return openGatewayIn(ctx, id);
    });
    expect(opened.secrets).toEqual({ auth_token: AUTH_TOKEN });
  });

  it('msgctl gateway show prints settings, secret names and the webhook URL, never the value', async () => {
    const r = await s.run(['gateway', 'show', 'twilio-main']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/account_sid\s+AC123/);
    expect(r.stdout).toMatch(/webhook url\s+http:\/\/127\.0\.0\.1:8080\/api\/webhook\.php\?gateway=gw_\w+/);
    expect(r.stdout).toContain('auth_token');
  });

  it('msgctl channel assign acme twilio-main sms --from +15550001111', async () => {
    const r = await s.run(['channel', 'assign', 'acme', 'twilio-main', 'sms', '--from', '+15550001111']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/sender\s+\+15550001111/);
    expect(r.stdout).toMatch(/gateway\s+twilio-main \(twilio\)/);
  });

  it('msgctl price set sms 0.0075 says SMS is priced per segment', async () => {
    const r = await s.run(['price', 'set', 'sms', '0.0075']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('0.0075 per segment');
    expect((await s.row(sql`SELECT amount FROM prices WHERE channel_type='sms'`)).amount).toBe(7500);
  });

  it('msgctl balance topup acme 100.00 --note "invoice 42"', async () => {
    const r = await s.run(['balance', 'topup', 'acme', '100.00', '--note', 'invoice 42']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/balance\s+100\.00 USD/);
    expect((await s.row(sql`SELECT balance FROM partners WHERE slug='acme'`)).balance).toBe(100_000_000);
  });

  it('msgctl ledger list acme shows the top-up as an aligned table', async () => {
    const r = await s.run(['ledger', 'list', 'acme']);
    expect(r.code).toBe(0);
    const [header, row] = r.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^#\s+TIME \(UTC\)\s+KIND\s+AMOUNT\s+BALANCE AFTER\s+NOTE\s+ACTOR/);
    expect(row).toMatch(/topup\s+100\.00 USD\s+100\.00 USD\s+invoice 42\s+cli:\S+/);
    // Aligned: the KIND column starts at the same offset in the header and the row.
    expect(row.indexOf('topup')).toBe(header.indexOf('KIND'));
  });

  // The SQLite file's bytes; on PostgreSQL the rows are checked above (the token's hash, the sealed secret).
  onSqlite('the database files hold neither secret in the clear', () => {
    for (const f of ['msgd.db', 'msgd.db-wal', 'msgd.db-shm']
      .map((n) => join(s.dataDir, n))
      .filter((f) => existsSync(f))) {
      const bytes = readFileSync(f);
      expect(bytes.includes(Buffer.from(AUTH_TOKEN)), f).toBe(false);
      expect(bytes.includes(Buffer.from(secret)), f).toBe(false);
    }
  });

  it('no command printed the gateway secret, and only token issue printed the token secret', () => {
    expect(s.results.filter(({ args }) => args[0] !== 'init').length).toBeGreaterThanOrEqual(9);
    for (const { args, r } of s.results) {
      expect(r.stdout + r.stderr, args.join(' ')).not.toContain(AUTH_TOKEN);
      if (!(args[0] === 'token' && args[1] === 'issue'))
        expect(r.stdout + r.stderr, args.join(' ')).not.toContain(secret);
    }
  });
});

describe('first session, --json output', () => {
  const s = session();
  const json = async (args: string[], opts: RunOptions = {}) => {
    const r = await s.run([...args, '--json'], opts);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    return JSON.parse(r.stdout);
  };
  let secret = '';

  onSqlite('init', async () => {
    const j = await json(['init']);
    expect(j).toMatchObject({
      created: true,
      data_dir: s.dataDir,
      master_key: { source: 'file', mode: '0600' },
      migrations: { applied: migrationTags() },
    });
    expect((await json(['init'])).created).toBe(false);
  });

  it('partner create', async () => {
    const j = await json(['partner', 'create', 'acme', '--name', 'Acme Ltd']);
    expect(j).toMatchObject({
      slug: 'acme',
      name: 'Acme Ltd',
      status: 'active',
      currency: 'USD',
      balance: { micro: 0, amount: '0.00', currency: 'USD' },
    });
    expect(j.id).toMatch(/^prt_/);
  });

  it('token issue: the secret is a field, and nothing goes to stderr', async () => {
    const j = await json(['token', 'issue', 'acme', '--name', 'prod', '--scopes', 'messages:send,messages:read']);
    expect(j).toMatchObject({
      name: 'prod',
      scopes: ['messages:read', 'messages:send'],
      state: 'active',
      expires_at: null,
    });
    expect(j.secret).toMatch(/^msgd_live_[A-Za-z0-9_-]{43,}$/);
    expect(j.secret.startsWith(j.prefix)).toBe(true);
    secret = j.secret;
    const list = await json(['token', 'list', 'acme']);
    expect(list.data).toHaveLength(1);
    expect(list.data[0]).not.toHaveProperty('secret');
    expect(JSON.stringify(list)).not.toContain(secret);
  });

  it('gateway add and show', async () => {
    const j = await json(
      [
        'gateway',
        'add',
        'twilio',
        '--name',
        'twilio-main',
        '--set',
        'account_sid=AC123',
        '--secret-stdin',
        'auth_token',
      ],
      {
        stdin: `${AUTH_TOKEN}\n`,
      },
    );
    expect(j).toMatchObject({
      kind: 'twilio',
      name: 'twilio-main',
      status: 'active',
      settings: { account_sid: 'AC123' },
      secret_names: ['auth_token'],
    });
    const show = await json(['gateway', 'show', 'twilio-main']);
    expect(show.webhook_url).toBe(`http://127.0.0.1:8080/api/webhook.php?gateway=${j.id}`);
    expect(show).not.toHaveProperty('secrets');
  });

  it('channel assign, price set, balance topup, ledger list', async () => {
    const ch = await json(['channel', 'assign', 'acme', 'twilio-main', 'sms', '--from', '+15550001111']);
    expect(ch).toMatchObject({
      type: 'sms',
      sender: '+15550001111',
      status: 'active',
      gateway: { name: 'twilio-main', kind: 'twilio' },
    });
    const price = await json(['price', 'set', 'sms', '0.0075']);
    expect(price).toMatchObject({
      channel: 'sms',
      per: 'segment',
      scope: 'default',
      amount: { micro: 7500, amount: '0.0075', currency: null },
    });
    const top = await json(['balance', 'topup', 'acme', '100.00', '--note', 'invoice 42']);
    expect(top.entry).toMatchObject({
      kind: 'topup',
      amount: { micro: 100_000_000, amount: '100.00', currency: 'USD' },
      note: 'invoice 42',
    });
    expect(top.partner.balance).toEqual({ micro: 100_000_000, amount: '100.00', currency: 'USD' });
    const ledger = await json(['ledger', 'list', 'acme']);
    expect(ledger.data).toHaveLength(1);
    expect(ledger.data[0]).toMatchObject({
      kind: 'topup',
      balance_after: { micro: 100_000_000 },
      actor: expect.stringMatching(/^cli:/),
    });
  });

  it('partner show has balance, credit, available, channels and the token count', async () => {
    const j = await json(['partner', 'show', 'acme']);
    expect(j.available).toEqual({ micro: 100_000_000, amount: '100.00', currency: 'USD' });
    expect(j.credit_limit.micro).toBe(0);
    expect(j.channels).toHaveLength(1);
    expect(j.tokens).toEqual({ active: 1, total: 1 });
  });

  it('no output carried the gateway secret; only token issue carried the token secret', () => {
    for (const { args, r } of s.results) {
      expect(r.stdout + r.stderr, args.join(' ')).not.toContain(AUTH_TOKEN);
      if (!(args[0] === 'token' && args[1] === 'issue'))
        expect(r.stdout + r.stderr, args.join(' ')).not.toContain(secret);
    }
  });
});
