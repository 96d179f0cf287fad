import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openGatewaysOfKindIn } from '../../src/core/gateway-secrets.js';
import { addGateway } from '../../src/core/gateways.js';
import { readWebhookLog } from '../../src/core/webhook-log.js';
import { sql } from '../../src/db/sql.js';
import { historyOf, message, waitStatus } from '../helpers/rows.js';
import { postJson, startTestServer, type TestServer } from '../helpers/server.js';
import { oneErrorLine, runCli, type RunOptions } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';

// msgctl drives the sandbox like a provider: a signed webhook over real HTTP to the running
// msgd of the same store, through the same intake and processing as any provider's.

let s: TestServer;
let secret: string;
let sandboxId: string;

beforeAll(async () => {
  s = await startTestServer({ 'demo.enabled': true });
  const [sandbox] = await openGatewaysOfKindIn(s.ctx, ['sandbox']);
  secret = sandbox.secrets.signing_secret;
  sandboxId = sandbox.id;
  await addGateway(
    s.ctx,
    { kind: 'twilio', name: 'tw', settings: { account_sid: 'AC1' }, secrets: { auth_token: 'x' } },
    't',
  );
});
afterAll(async () => {
  await s.stop();
});

/** A port nothing listens on. */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

const run = (args: string[], opts: RunOptions = {}) =>
  runCli(args, { ...opts, dataDir: s.dataDir, env: { ...s.storeEnv, ...opts.env } });
const port = () => new URL(s.url).port;

function processed(id: string) {
  return waitFor(
    async () => {
      const r = await readWebhookLog(s.ctx, id);
      return r && r.processing !== 'pending' ? r : undefined;
    },
    `webhook ${id} processed`,
    10_000,
  );
}

describe('msgctl sandbox inbound', () => {
  it("posts a signed inbound message to the msgd at the config's host and port", async () => {
    const r = await run(
      ['--json', 'sandbox', 'inbound', 'sandbox', '--channel', 'sms', '--from', '+14155550123', '--text', 'Hello back'],
      { env: { MSGD_HOST: '127.0.0.1', MSGD_PORT: port() } },
    );
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({
      webhook_id: expect.stringMatching(/^pwh_/),
      url: `http://127.0.0.1:${port()}/api/webhook.php?gateway=${sandboxId}`,
      event: { type: 'message', channel: 'sms', from: '+14155550123', to: '+15550000001', text: 'Hello back' },
    });
    const row = await processed(out.webhook_id);
    expect(row).toMatchObject({ provider: 'sandbox', verification: 'ok', processing: 'processed' });
    const ev = (await s.ctx.store.get<{ payload: string }>(
      sql`SELECT payload FROM events WHERE type = 'message.received' ORDER BY id DESC LIMIT 1`,
    ))!;
    expect(JSON.parse(ev.payload)).toMatchObject({ channel: 'sms', from: '+14155550123', body: 'Hello back' });
    expect(r.stdout + r.stderr).not.toContain(secret);
  });

  it('takes --url, says which channel when the gateway serves several, and prints no secret', async () => {
    const several = await run([
      'sandbox',
      'inbound',
      'sandbox',
      '--from',
      '+14155550123',
      '--text',
      'x',
      '--url',
      s.url,
    ]);
    expect(several.code).toBe(1);
    expect(oneErrorLine(several.stderr)).toMatch(
      /gateway sandbox serves .*sms \+15550000001.*: say which with --to and\/or --channel/,
    );
    const r = await run([
      'sandbox',
      'inbound',
      'sandbox',
      '--to',
      '+15550000002',
      '--from',
      '+14155550124',
      '--text',
      'Hi on WhatsApp',
      '--url',
      s.url,
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Posted a signed inbound whatsapp message from +14155550124 to +15550000002 (demo).');
    expect(r.stdout + r.stderr).not.toContain(secret);
  });

  it('refuses clearly: msgd not running, a gateway that is no sandbox, a bad --url or channel type', async () => {
    const closed = await freePort();
    const down = await run([
      'sandbox',
      'inbound',
      'sandbox',
      '--channel',
      'sms',
      '--from',
      '+1415',
      '--text',
      'x',
      '--url',
      `http://127.0.0.1:${closed}`,
    ]);
    expect(down.code).toBe(1);
    expect(oneErrorLine(down.stderr)).toMatch(
      new RegExp(`cannot reach msgd at http://127\\.0\\.0\\.1:${closed} \\(ECONNREFUSED\\): is it running there\\?`),
    );
    const tw = await run(['sandbox', 'inbound', 'tw', '--from', '+1415', '--text', 'x', '--url', s.url]);
    expect(tw.code).toBe(1);
    expect(oneErrorLine(tw.stderr)).toBe('msgctl: gateway tw is a twilio gateway, not a sandbox');
    const url = await run(['sandbox', 'inbound', 'sandbox', '--from', '+1415', '--text', 'x', '--url', 'ftp://x']);
    expect(url.code).toBe(2);
    const type = await run(['sandbox', 'inbound', 'sandbox', '--channel', 'fax', '--from', '+1415', '--text', 'x']);
    expect(type.code).toBe(2);
    expect(oneErrorLine(type.stderr)).toMatch(/unknown channel type "fax"/);
  });
});

describe('msgctl sandbox status', () => {
  it('reports a status for a message sent through the sandbox, applied as a provider report', async () => {
    const res = await postJson(`${s.url}/api/send-sms.php`, { to: '+14155550123', text: 'ping' }, s.demo!.token);
    expect(res.status).toBe(200);
    const id = res.body.id as string;
    await waitStatus(s.ctx, id, 'delivered');
    const r = await run(['--json', 'sandbox', 'status', 'sandbox', id, '--status', 'read', '--url', s.url]);
    expect(r.code, r.stderr).toBe(0);
    await processed(JSON.parse(r.stdout).webhook_id);
    expect((await message(s.ctx, id)).status).toBe('read');
    expect(await historyOf(s.ctx, id)).toEqual(['queued', 'sent', 'delivered', 'read']);
    expect(r.stdout).not.toContain(secret);
  });

  it('refuses an unknown status before reading anything, and a message of another gateway', async () => {
    const bad = await run(['sandbox', 'status', 'sandbox', 'msg_x', '--status', 'teleported']);
    expect(bad.code).toBe(2);
    expect(oneErrorLine(bad.stderr)).toMatch(/--status must be one of sent, delivered, read, failed, undelivered/);
    const missing = await run(['sandbox', 'status', 'sandbox', 'msg_nope', '--status', 'read', '--url', s.url]);
    expect(missing.code).toBe(1);
    expect(oneErrorLine(missing.stderr)).toBe('msgctl: message "msg_nope" not found');
  });
});
