import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import { webhookRetentionTask } from '../../src/webhooks-in/process.js';
import { metaHeaders, postWebhook, waInbound } from '../fakes/webhook-senders.js';
import { cleanEnv, MSGCTL, runCli, startCli } from '../helpers/cli.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { processed } from '../helpers/webhook-log.js';
import { waitFor } from '../helpers/wait.js';

// msgctl webhooks log against the live server's store (on SQLite, WAL lets both open it):
// in-process, and once as the real binary ended by Ctrl-C.

/** Where msgctl finds the live server's store. */
const at = () => ({ dataDir: s.dataDir, env: s.storeEnv });

/** `msgctl webhooks log …` against the live server's store. */
const msgctl = (args: string[]) => runCli(['webhooks', 'log', ...args], at());

async function json(args: string[]) {
  const r = await msgctl([...args, '--json']);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout).data as any[];
}

let s: TestServer;
const ids: string[] = [];
const SECRET = 'cli-app-secret';

beforeAll(async () => {
  // A short dispatch timeout: a status for an unknown message is waited on for about that long.
  s = await startTestServer({ 'dispatch.timeoutMs': 2000 });
  const p = await setupPartner(s.ctx);
  await connect(
    s.ctx,
    p.partnerId,
    {
      kind: 'whatsapp_cloud',
      name: 'wa-cli',
      settings: { phone_number_id: '5551' },
      secrets: { access_token: 't', app_secret: SECRET },
    },
    'whatsapp',
    '+15550783881',
  );
  // Addressed to a number no gateway has: verified by the app secret, then unroutable.
  const body = JSON.stringify(waInbound('9999', { from: '14155550100', id: 'wamid.CLI', text: { body: 'hi' } }));
  const url = `${s.url}/api/webhook.php`;
  ids.push((await postWebhook(url, body, metaHeaders(SECRET, body))).json.id);
  await processed(s.ctx, ids[0]);
  ids.push((await postWebhook(url, body, metaHeaders('wrong', body))).headers.get('x-msgd-webhook-id')!);
  ids.push(
    (await postWebhook(url, '{"what":1}', { 'content-type': 'application/json' })).headers.get('x-msgd-webhook-id')!,
  );
});
afterAll(async () => {
  await s.stop();
});

describe('msgctl webhooks log', () => {
  it('--json lists the latest rows oldest first, with outcomes and redacted headers, no body', async () => {
    const data = await json([]);
    expect(data.map((r) => r.id)).toEqual(ids);
    expect(data[0]).toMatchObject({
      provider: 'whatsapp',
      verification: 'ok',
      processing: 'unroutable',
      path: '/api/webhook.php',
      body_bytes: expect.any(Number),
    });
    expect(data[1]).toMatchObject({
      verification: 'failed',
      processing: 'rejected',
      verification_reason: expect.stringContaining('signature does not match'),
    });
    expect(data[2]).toMatchObject({ provider: 'unknown', processing: 'rejected' });
    expect(data[0].headers['x-hub-signature-256']).toBe('[redacted]');
    expect(data[0]).not.toHaveProperty('body');
  });

  it('filters by provider, gateway (name) and --failed; --limit and --body', async () => {
    expect((await json(['--provider', 'whatsapp'])).map((r) => r.id)).toEqual(ids.slice(0, 2));
    expect((await json(['--gateway', 'wa-cli'])).map((r) => r.id)).toEqual(ids.slice(0, 2));
    expect((await json(['--failed'])).map((r) => r.id)).toEqual(ids);
    const [one] = await json(['--limit', '1', '--body']);
    expect(one).toMatchObject({ id: ids[2], body: '{"what":1}' });
  });

  it('prints a readable table, and refuses an unknown provider', async () => {
    const r = await msgctl([]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^TIME \(UTC\)\s+ID\s+PROVIDER\s+GATEWAY\s+VERIFIED\s+PROCESSING\s+PATH\s+NOTE/);
    expect(r.stdout).toContain('wa-cli');
    const bad = await msgctl(['--provider', 'fax']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('--provider must be one of');
  });

  it("a body sent by anyone cannot drive the operator's terminal: control characters are shown escaped", async () => {
    const evil = '{"x":"\u001b]0;owned\u0007\u001b[2J"}';
    const id = (
      await postWebhook(`${s.url}/api/webhook.php`, evil, { 'content-type': 'application/json' })
    ).headers.get('x-msgd-webhook-id')!;
    const r = await msgctl(['--limit', '1', '--body']);
    expect(r.stdout).toContain(id);
    expect(r.stdout).not.toMatch(/[\u001b\u0007]/);
    expect(r.stdout).toContain('\\u001b]0;owned\\u0007');
    ids.push(id);
  });

  it('--follow prints a status still waiting for its message, then again when it settles (also with --failed)', async () => {
    const follow = (extra: string[]) => {
      const cli = startCli(['--json', 'webhooks', 'log', '--follow', '--limit', '1', ...extra], at());
      return {
        cli,
        lines: () =>
          cli
            .stdout()
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l)),
      };
    };
    const plain = follow([]);
    const failed = follow(['--failed']);
    // Both have read where the log ends (plain printed its one latest row) before the new one comes.
    await waitFor(() => plain.lines().length === 1, 'plain --follow to print the latest row');
    const body = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: '1',
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: { display_phone_number: '15550783881', phone_number_id: '5551' },
                statuses: [
                  { id: 'wamid.NOBODY', status: 'delivered', timestamp: '1700000000', recipient_id: '14155550100' },
                ],
              },
            },
          ],
        },
      ],
    });
    const res = await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders(SECRET, body));
    ids.push(res.json.id);
    // Started while the row is pending: it is behind this one's starting point, and still shown once settled.
    const late = follow(['--failed']);
    // Waited on for dispatch.timeoutMs (2 s here) + 2 s, so past the 5 s --follow holds a row.
    const mine = (f: { lines: () => any[] }) => f.lines().filter((r) => r.id === res.json.id);
    const settled = (f: { lines: () => any[] }) => mine(f).some((r) => r.processing === 'unroutable');
    await waitFor(
      () => settled(failed) && settled(plain) && settled(late),
      'every follower to print the settled row',
      20_000,
      50,
    );
    // Plain --follow printed it pending once its 5 s hold ran out (unless a slow poll only saw
    // it settled), then settled.
    const seen = mine(plain).map((r) => r.processing);
    expect(seen.at(-1)).toBe('unroutable');
    expect(seen.slice(0, -1).every((p) => p === 'pending')).toBe(true);
    expect(seen.length).toBeLessThanOrEqual(2);
    expect(mine(failed).map((r) => [r.id, r.processing])).toEqual([[res.json.id, 'unroutable']]);
    expect(mine(late).map((r) => [r.id, r.processing])).toEqual([[res.json.id, 'unroutable']]);
    for (const f of [plain, failed, late]) expect((await f.cli.stop()).code).toBe(0);
  }, 40_000);

  it('--follow streams new webhooks once processed, until SIGINT', async () => {
    const child = spawn(
      process.execPath,
      [MSGCTL, '--data-dir', s.dataDir, '--json', 'webhooks', 'log', '--follow', '--limit', '1'],
      { env: { ...cleanEnv(), ...s.storeEnv } },
    );
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d));
    const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? -1)));
    const lines = () =>
      out
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    const until = (n: number) =>
      waitFor(() => (lines().length >= n ? lines() : null), `${n} line(s) from --follow`, 15_000);
    expect((await until(1)).map((r) => r.id)).toEqual([ids[ids.length - 1]]);
    const body = JSON.stringify(waInbound('5551', { from: '14155550100', id: 'wamid.CLI2', text: { body: 'hello' } }));
    const res = await postWebhook(`${s.url}/api/webhook.php`, body, metaHeaders(SECRET, body));
    const streamed = await until(2);
    expect(streamed[1]).toMatchObject({ id: res.json.id, provider: 'whatsapp' });
    expect(streamed[1].processing).toBe('processed');
    child.kill('SIGINT');
    expect(await exited).toBe(0);
  }, 30_000);
});

describe('msgctl webhooks reprocess', () => {
  it('processes an unroutable webhook again once its channel exists; refuses unverified and settled ones', async () => {
    // ids[0] was addressed to phone number id 9999, which no gateway had.
    const p = await setupPartner(s.ctx);
    await connect(
      s.ctx,
      p.partnerId,
      {
        kind: 'whatsapp_cloud',
        name: 'wa-late',
        settings: { phone_number_id: '9999' },
        secrets: { access_token: 't', app_secret: SECRET },
      },
      'whatsapp',
      '+15550009999',
    );
    const r = await runCli(['webhooks', 'reprocess', ids[0]], at());
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('1 webhook(s) queued to be processed again');
    expect((await processed(s.ctx, ids[0])).processing).toBe('processed');
    const msg = await s.ctx.store.get(
      sql`SELECT partner_id, "from" FROM messages WHERE provider_message_id = 'wamid.CLI'`,
    );
    expect(msg).toEqual({ partner_id: p.partnerId, from: '+14155550100' });

    const again = await runCli(['webhooks', 'reprocess', ids[0]], at());
    expect([again.code, again.stderr]).toEqual([
      1,
      expect.stringContaining('is processed: only unroutable or errored'),
    ]);
    const unsigned = await runCli(['webhooks', 'reprocess', ids[1]], at());
    expect([unsigned.code, unsigned.stderr]).toEqual([1, expect.stringContaining('was not verified')]);
    expect((await runCli(['webhooks', 'reprocess'], at())).code).toBe(2);
    const none = await runCli(['webhooks', 'reprocess', '--unroutable', '--since', '2020-01-01', '--json'], at());
    expect(JSON.parse(none.stdout).queued).not.toContain(ids[0]);
  });
});

describe('msgctl webhooks log --outbound', () => {
  it('merges delivery attempts to partner endpoints into the same timeline', async () => {
    const p = await setupPartner(s.ctx);
    const at = Date.now();
    await s.ctx.store.run(
      sql`INSERT INTO webhook_endpoints (id, partner_id, url, secret, status, created_at, updated_at) VALUES ('whe_cli', ${p.partnerId}, 'https://hooks.example.com/x', 'sealed', 'enabled', ${at}, ${at})`,
    );
    await s.ctx.store.run(
      sql`INSERT INTO webhook_deliveries (id, event_id, endpoint_id, partner_id, status, attempts, created_at, updated_at) VALUES ('dlv_cli', 'evt_cli', 'whe_cli', ${p.partnerId}, 'failed', 1, ${at}, ${at})`,
    );
    await s.ctx.store.run(
      sql`INSERT INTO webhook_attempts (delivery_id, attempt_no, status_code, duration_ms, error, created_at) VALUES ('dlv_cli', 1, 503, 12, 'HTTP 503', ${at + 60_000})`,
    );
    const data = await json(['--outbound']);
    expect(data.filter((r) => r.direction === 'in').map((r) => r.id)).toEqual(expect.arrayContaining(ids));
    const last = data[data.length - 1];
    expect(last).toMatchObject({
      direction: 'out',
      event_id: 'evt_cli',
      url: 'https://hooks.example.com/x',
      status_code: 503,
      attempt: 1,
    });
    const text = await msgctl(['--outbound']);
    expect(text.stdout).toMatch(/out #1\s+-\s+503\s+12 ms\s+https:\/\/hooks\.example\.com\/x/);
    // Without the flag, inbound only.
    expect((await json([])).every((r) => r.direction === undefined)).toBe(true);
  });
});

describe('retention', () => {
  it('the cron task deletes log rows older than webhooksIn.retentionDays', async () => {
    const old = Date.now() - 31 * 86_400_000;
    await s.ctx.store.run(sql`UPDATE provider_webhooks SET received_at = ${old} WHERE id = ${ids[0]}`);
    const task = webhookRetentionTask();
    expect(task.name).toBe('provider-webhooks-expire');
    expect(s.rt.maintenanceTasks.map((t) => t.name)).toContain('provider-webhooks-expire');
    expect(await task.run(s.rt)).toEqual({ deleted: 1 });
    expect((await json([])).map((r) => r.id)).not.toContain(ids[0]);
  });
});
