import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { coreCtxOf } from '../../src/cli/context.js';
import { loadConfig } from '../../src/config/load.js';
import { createEndpoint } from '../../src/core/endpoints.js';
import { openPg, type PgStore } from '../../src/db/pg/store.js';
import { sql } from '../../src/db/sql.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { type CliResult, oneErrorLine, runCli } from '../helpers/cli.js';
import { migratedDatabase } from './helpers.js';

// Every msgctl command on a PostgreSQL database holding a partner, gateways, channels, messages
// and a webhook endpoint: each answers (with --json where it has it), none answers
// not_on_postgresql; the data-directory commands say what does their job on PostgreSQL.

const KEY = randomBytes(32).toString('hex');
const WABA = '102290129340398';
const WA_TOKEN = 'EAA-pg-token';
const db = migratedDatabase();
let store: PgStore;
let hook: Server;
let hookUrl: string;
let endpointId: string;
let graph: GraphFake;
const sent: string[] = [];

const cli = (args: string[], stdin?: string, env: Record<string, string> = {}): Promise<CliResult> =>
  runCli(args, { env: { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: KEY, ...env }, stdin });

/** `msgctl --json …`: exit 0 and the JSON it printed. */
async function json(args: string[], stdin?: string, env?: Record<string, string>) {
  const r = await cli(['--json', ...args], stdin, env);
  expect(r.code, `msgctl ${args.join(' ')}: ${r.stderr}`).toBe(0);
  expect(r.stderr).not.toContain('not_on_postgresql');
  return JSON.parse(r.stdout);
}

beforeAll(async () => {
  store = openPg(db.url, { logger: pino({ level: 'silent' }), poolSize: 2 });
  // msgd's stand-in for sandbox commands and the endpoint's receiver: answers 200 to every POST.
  hook = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      sent.push(`${req.url} ${body}`);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}`;

  await json(['partner', 'create', 'acme', '--name', 'Acme Ltd']);
  await json(['partner', 'create', 'globex', '--name', 'Globex']);
  await json(['gateway', 'add', 'sandbox', '--name', 'sbx']);
  await json(['gateway', 'add', 'sandbox', '--name', 'sbx-2']);
  await json(
    ['gateway', 'add', 'twilio', '--name', 'tw', '--set', 'account_sid=AC123', '--secret-stdin', 'auth_token'],
    'tw-secret-8c1f\n',
  );
  graph = await startGraphFake();
  graph.setCatalogue(WABA, WA_TOKEN, [
    {
      id: '5001',
      name: 'order_update',
      language: 'en_US',
      status: 'APPROVED',
      category: 'UTILITY',
      components: [{ type: 'BODY', text: 'Order {{1}} is on its way' }],
    },
  ]);
  await json(
    [
      'gateway',
      'add',
      'whatsapp_cloud',
      '--name',
      'wa',
      '--set',
      `base_url=${graph.url}`,
      '--set',
      'phone_number_id=106540352242922',
      '--set',
      `waba_id=${WABA}`,
      '--secret-env',
      'access_token=WA_TOKEN',
    ],
    undefined,
    { WA_TOKEN },
  );
  await json(['channel', 'assign', 'acme', 'sbx', 'sms', '--from', '+15550001111']);
  await json(['channel', 'assign', 'acme', 'sbx', 'email', '--from', 'news@acme.example']);
  await json(['price', 'set', 'sms', '0.0075']);
  await json(['balance', 'topup', 'acme', '100.00', '--note', 'invoice 42']);

  const ctx = coreCtxOf({ db: undefined as never, store, masterKey: Buffer.from(KEY, 'hex') }, loadConfig({ env: {} }));
  endpointId = (await createEndpoint(ctx, (await partnerId('acme'))!, { url: `${hookUrl}/hook` })).endpoint.id;
  const channel = await store.get<{ id: string; gateway_id: string }>(
    sql`SELECT id, gateway_id FROM channels WHERE type = 'sms' LIMIT 1`,
  );
  const pid = (await partnerId('acme'))!;
  const now = Date.now();
  for (const [i, status] of ['delivered', 'failed', 'scheduled'].entries()) {
    const id = `msg_pgall${i}`;
    await store.run(
      sql`INSERT INTO messages (id, partner_id, direction, channel_type, channel_id, gateway_id, "to", "from", content, status,
            provider_message_id, provider_id_indexed, error_code, dispatch_uncertain, price, segments, send_at, created_at, updated_at)
          VALUES (${id}, ${pid}, 'outbound', 'sms', ${channel!.id}, ${channel!.gateway_id}, '+15550002222', '+15550001111', '{"kind":"text","text":"hi"}',
            ${status}, ${`sbx-${i}`}, 1, ${status === 'failed' ? '30003' : null}, 0, 7500, 1,
            ${status === 'scheduled' ? now + 3_600_000 : null}, ${now + i}, ${now + i})`,
    );
    await store.run(
      sql`INSERT INTO message_status_history (message_id, status, occurred_at, created_at) VALUES (${id}, ${status}, ${now + i}, ${now + i})`,
    );
  }
}, 30_000);

afterAll(async () => {
  await store?.close();
  await new Promise((r) => hook?.close(r));
  await graph?.close();
});

const partnerId = async (slug: string) =>
  (await store.get<{ id: string }>(sql`SELECT id FROM partners WHERE slug = ${slug}`))?.id;

const data = (r: { data: unknown[] }) => r.data;

describe('every msgctl command on PostgreSQL', () => {
  it('partner: create, list, show, set-credit, set-limits, suspend, activate', async () => {
    expect(data(await json(['partner', 'list'])).map((p: any) => p.slug)).toEqual(['acme', 'globex']);
    const acme = await json(['partner', 'show', 'acme']);
    expect(acme).toMatchObject({ slug: 'acme', balance: { amount: '100.00' } });
    expect(acme.channels.map((c: any) => c.type).sort()).toEqual(['email', 'sms']);
    expect(await json(['partner', 'set-credit', 'globex', '5.00'])).toMatchObject({ credit_limit: { amount: '5.00' } });
    expect(
      await json(['partner', 'set-limits', 'globex', '--rate-limit', '120', '--low-balance', '1.00']),
    ).toMatchObject({ rate_limit_per_minute: 120, low_balance_threshold: { amount: '1.00' } });
    expect(await json(['partner', 'suspend', 'globex'])).toMatchObject({ status: 'suspended' });
    expect(await json(['partner', 'activate', 'globex'])).toMatchObject({ status: 'active' });
  });

  it('token: issue, list, revoke', async () => {
    const issued = await json(['token', 'issue', 'acme', '--name', 'prod', '--scopes', 'messages:read']);
    expect(issued).toMatchObject({ name: 'prod', state: 'active', scopes: ['messages:read'] });
    expect(data(await json(['token', 'list', 'acme'])).map((t: any) => t.id)).toEqual([issued.id]);
    expect(await json(['token', 'revoke', issued.id, '--yes'])).toMatchObject({ id: issued.id, state: 'revoked' });
  });

  it('user: invite, list, disable, enable, reset, reset-2fa, remove', async () => {
    expect(await json(['user', 'invite', 'acme', 'ann@acme.example', '--role', 'admin'])).toMatchObject({
      email: 'ann@acme.example',
      role: 'admin',
      state: 'invited',
    });
    await json(['user', 'invite', 'acme', 'bob@acme.example', '--role', 'developer']);
    expect(data(await json(['user', 'list', 'acme'])).map((u: any) => u.email)).toEqual([
      'ann@acme.example',
      'bob@acme.example',
    ]);
    expect(await json(['user', 'disable', 'acme', 'bob@acme.example'])).toMatchObject({ state: 'disabled' });
    expect(await json(['user', 'enable', 'acme', 'bob@acme.example'])).toMatchObject({ state: 'invited' });
    expect(await json(['user', 'reset', 'acme', 'bob@acme.example'])).toMatchObject({ email: 'bob@acme.example' });
    // Refused by a rule of the data, not by the store: bob never turned two-factor on.
    const twoFa = await cli(['--json', 'user', 'reset-2fa', 'acme', 'bob@acme.example', '--yes']);
    expect([twoFa.code, oneErrorLine(twoFa.stderr)]).toEqual([
      1,
      'msgctl: bob@acme.example has no two-factor authentication to reset',
    ]);
    expect(await json(['user', 'remove', 'acme', 'bob@acme.example', '--yes'])).toMatchObject({
      email: 'bob@acme.example',
    });
    expect(data(await json(['user', 'list', 'acme'])).map((u: any) => u.email)).toEqual(['ann@acme.example']);
  });

  it('gateway: list, show, update, templates sync and list, remove', async () => {
    expect(data(await json(['gateway', 'list'])).map((g: any) => g.name)).toEqual(['sbx', 'sbx-2', 'tw', 'wa']);
    const tw = await json(['gateway', 'show', 'tw']);
    expect(tw).toMatchObject({ kind: 'twilio', secret_names: ['auth_token'] });
    expect(JSON.stringify(tw)).not.toContain('tw-secret-8c1f');
    expect(await json(['gateway', 'update', 'tw', '--set', 'account_sid=AC999'])).toMatchObject({
      settings: { account_sid: 'AC999' },
    });
    expect(await json(['gateway', 'update', 'sbx-2', '--disable'])).toMatchObject({ status: 'disabled' });
    expect(await json(['gateway', 'update', 'sbx-2', '--enable'])).toMatchObject({ status: 'active' });
    const synced = await cli(['gateway', 'templates', 'sync', 'wa']);
    expect(synced.code, synced.stderr).toBe(0);
    expect(synced.stdout).toMatch(/Read 1 template of wa from Meta/);
    expect(data(await json(['gateway', 'templates', 'list', 'wa']))).toEqual([
      expect.objectContaining({ name: 'order_update', status: 'APPROVED' }),
    ]);
    expect(await json(['gateway', 'remove', 'tw', '--yes'])).toMatchObject({ name: 'tw' });
  });

  it('channel: assign, list, fallback add/list/remove, unassign', async () => {
    expect(data(await json(['channel', 'list'])).map((c: any) => `${c.type}:${c.gateway.name}`)).toEqual([
      'email:sbx',
      'sms:sbx',
    ]);
    expect(await json(['channel', 'assign', 'globex', 'sbx-2', 'sms', '--from', '+15550003333'])).toMatchObject({
      status: 'active',
      role: 'primary',
    });
    expect(await json(['channel', 'fallback', 'add', 'acme', 'sms', 'sbx-2'])).toMatchObject({
      role: 'fallback',
      position: 1,
    });
    expect(data(await json(['channel', 'fallback', 'list', 'acme', 'sms'])).map((c: any) => c.gateway.name)).toEqual([
      'sbx',
      'sbx-2',
    ]);
    expect(await json(['channel', 'fallback', 'remove', 'acme', 'sms', 'sbx-2'])).toMatchObject({ status: 'inactive' });
    expect(await json(['channel', 'unassign', 'globex', 'sms'])).toMatchObject({ status: 'inactive' });
    expect(data(await json(['channel', 'list', 'globex', '--all'])).map((c: any) => c.status)).toEqual(['inactive']);
  });

  it('price: set, list, unset', async () => {
    expect(await json(['price', 'set', 'sms', '0.005', '--partner', 'acme'])).toMatchObject({ scope: 'partner' });
    expect(await json(['price', 'set', 'sms', '0.006', '--gateway', 'sbx'])).toMatchObject({ scope: 'gateway' });
    expect(await json(['price', 'set', 'whatsapp', '0.02', '--category', 'utility'])).toMatchObject({
      category: 'utility',
    });
    expect(data(await json(['price', 'list'])).length).toBeGreaterThanOrEqual(3);
    expect(data(await json(['price', 'list', '--partner', 'acme'])).map((p: any) => p.scope)).toContain('partner');
    expect(await json(['price', 'unset', 'sms', '--partner', 'acme'])).toMatchObject({ removed: { scope: 'partner' } });
  });

  it('balance and ledger: topup, adjust, show, list; audit list', async () => {
    await json(['balance', 'topup', 'globex', '10.00', '--note', 'inv 7']);
    expect(await json(['balance', 'adjust', 'globex', '-1.50', '--note', 'correction'])).toMatchObject({
      entry: { kind: 'adjustment', balance_after: { amount: '8.50' } },
    });
    expect(await json(['balance', 'show', 'globex'])).toMatchObject({ balance: { amount: '8.50' } });
    expect(data(await json(['ledger', 'list', 'globex'])).map((e: any) => e.kind)).toEqual(['adjustment', 'topup']);
    expect(data(await json(['audit', 'list', '--limit', '2'])).map((e: any) => e.action)).toEqual([
      'balance.adjust',
      'balance.topup',
    ]);
  });

  it('messages: list, show, cancel, release-held', async () => {
    expect(data(await json(['messages', 'list'])).map((m: any) => m.id)).toEqual([
      'msg_pgall2',
      'msg_pgall1',
      'msg_pgall0',
    ]);
    expect(data(await json(['messages', 'list', '--partner', 'acme', '--failed'])).map((m: any) => m.id)).toEqual([
      'msg_pgall1',
    ]);
    expect(data(await json(['messages', 'list', '--uncertain']))).toEqual([]);
    const shown = await json(['messages', 'show', 'msg_pgall0']);
    expect(shown).toMatchObject({ id: 'msg_pgall0', status: 'delivered' });
    expect(shown.history.map((h: any) => h.status)).toEqual(['queued', 'delivered']);
    expect(await json(['messages', 'cancel', 'msg_pgall2'])).toMatchObject({ id: 'msg_pgall2', status: 'canceled' });
    expect(await json(['messages', 'release-held'])).toEqual({ released: 0 });
  });

  it('suppressions: add, list, remove, scope', async () => {
    const added = await json(['suppressions', 'add', 'acme', 'sms', '+15550009999', '--note', 'asked']);
    expect(added).toMatchObject({ address: '+15550009999', reason: 'manual', created: true });
    expect(data(await json(['suppressions', 'list', 'acme'])).map((x: any) => x.id)).toEqual([added.id]);
    expect(await json(['suppressions', 'remove', 'acme', added.id])).toMatchObject({ id: added.id, removed: true });
    expect(await json(['suppressions', 'scope', 'acme'])).toEqual({ partner: 'acme', opt_out_scope: 'sender' });
    expect(await json(['suppressions', 'scope', 'acme', 'partner'])).toEqual({
      partner: 'acme',
      opt_out_scope: 'partner',
    });
  });

  it('webhooks: endpoints, enable, replay, deliveries, log', async () => {
    expect(data(await json(['webhooks', 'endpoints'])).map((e: any) => [e.id, e.status])).toEqual([
      [endpointId, 'enabled'],
    ]);
    await store.run(
      sql`UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = 'gone', updated_at = ${Date.now()} WHERE id = ${endpointId}`,
    );
    expect(await json(['webhooks', 'enable', endpointId])).toMatchObject({ id: endpointId, status: 'enabled' });
    const replay = await json(['webhooks', 'replay', '--since', '1h']);
    expect(replay.queued.length).toBeGreaterThan(0);
    expect(data(await json(['webhooks', 'deliveries'])).length).toBe(replay.queued.length);
    expect(data(await json(['webhooks', 'log']))).toEqual([]);
    expect(data(await json(['webhooks', 'log', '--outbound', '--failed']))).toEqual([]);
  });

  it('jobs: stats, list, dead, retry, delete', async () => {
    expect(data(await json(['jobs', 'stats'])).every((j: any) => j.count > 0)).toBe(true);
    expect(Array.isArray(data(await json(['jobs', 'list'])))).toBe(true);
    expect(data(await json(['jobs', 'dead']))).toEqual([]);
    expect(await json(['jobs', 'retry', '--all'])).toEqual({ retried: 0, skipped: [] });
    expect(await json(['jobs', 'delete', '--all', '--yes'])).toEqual({ deleted: 0 });
  });

  it('sandbox: inbound and status post signed webhooks to msgd', async () => {
    sent.length = 0;
    const inbound = await json([
      'sandbox',
      'inbound',
      'sbx',
      '--channel',
      'sms',
      '--from',
      '+14155550123',
      '--text',
      'Hello',
      '--url',
      hookUrl,
    ]);
    expect(inbound).toMatchObject({ event: { type: 'message', from: '+14155550123', text: 'Hello' } });
    const status = await json(['sandbox', 'status', 'sbx', 'msg_pgall0', '--status', 'read', '--url', hookUrl]);
    expect(status).toMatchObject({ event: { status: 'read' } });
    expect(sent).toHaveLength(2);
    expect(sent[1]).toContain('sbx-0');
  });

  it('doctor, migrate and completion answer; the data-directory commands name what does their job', async () => {
    const doctor = await json(['doctor']);
    expect(doctor).toMatchObject({ ok: true, failures: 0 });
    expect(await json(['migrate'])).toMatchObject({ applied: [], up_to_date: true });
    expect(await json(['completion', 'bash'])).toMatchObject({ shell: 'bash' });
    for (const [args, says] of [
      [['backup', '/tmp/msgd-pg-backup'], /msgctl backup .*pg_dump/],
      [['restore', '/tmp/msgd-pg-backup'], /msgctl restore .*pg_restore/],
      [['init'], /msgctl init .*no data directory to create/],
    ] as const) {
      const r = await cli(['--json', ...args]);
      expect(r.code, args[0]).toBe(1);
      expect(r.stdout).toBe('');
      expect(oneErrorLine(r.stderr)).toMatch(says);
      expect(r.stderr).not.toContain(new URL(db.url).password);
    }
  });
});
