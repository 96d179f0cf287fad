import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../helpers/server.js';
import { call, startV1 } from './helpers.js';

// The document as its users take it: openapi-typescript generates a client's types from it
// (with TypeScript 5, in tools/openapi-check: the project's TypeScript 7 has no compiler API for
// it), a sample integration compiles against them and a wrong request does not; Redocly's
// recommended lint passes with no warning.

const run = promisify(execFile);
const TOOLS = resolve('tools/openapi-check');
const BIN = join(TOOLS, 'node_modules/.bin');

let server: TestServer;
let dir: string;

beforeAll(async () => {
  if (!existsSync(join(BIN, 'openapi-typescript')))
    throw new Error('tools/openapi-check is not installed: run npm ci --prefix tools/openapi-check');
  server = await startV1();
  dir = mkdtempSync(join(tmpdir(), 'msgd-openapi-'));
  writeFileSync(join(dir, 'openapi.json'), (await call(server, 'GET', '/v1/openapi.json')).text);
  await run(join(BIN, 'openapi-typescript'), [join(dir, 'openapi.json'), '-o', join(dir, 'api.d.ts')]);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: 'es2022',
        module: 'es2022',
        moduleResolution: 'bundler',
        lib: ['es2022', 'dom'],
        skipLibCheck: false,
      },
      files: ['api.d.ts', 'sample.ts'],
    }),
  );
}, 120_000);
afterAll(async () => {
  await server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The types a client integration uses, shared by the good and the bad sample. */
const PRELUDE = `import type { components, paths, webhooks } from './api';
type Send = paths['/v1/messages']['post'];
type SendBody = Send['requestBody']['content']['application/json'];
type Accepted = Send['responses'][200]['content']['application/json'];
type ApiError = components['schemas']['Error'];
export async function send(token: string, body: SendBody, key?: string): Promise<Accepted> {
  const r = await fetch('https://msgd.example.com/v1/messages', {
    method: 'POST',
    headers: { authorization: 'Bearer ' + token, 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
    body: JSON.stringify(body),
  });
  if (r.status !== 200) throw new Error(((await r.json()) as ApiError).error.code);
  return (await r.json()) as Accepted;
}
`;

async function compile(source: string): Promise<{ ok: boolean; output: string }> {
  writeFileSync(join(dir, 'sample.ts'), PRELUDE + source);
  try {
    await run(join(BIN, 'tsc'), ['-p', join(dir, 'tsconfig.json')]);
    return { ok: true, output: '' };
  } catch (e: any) {
    return { ok: false, output: String(e.stdout ?? '') + String(e.stderr ?? '') };
  }
}

describe('a TypeScript client generated from /v1/openapi.json', () => {
  it('compiles a sample integration: sends on every channel, pages messages, the legacy API, events', async () => {
    const r = await compile(`
export async function integration(token: string) {
  const a = await send(token, { channel: 'sms', to: '+14155550123', body: 'Your code is 4711' });
  await send(token, { channel: 'whatsapp', to: '+447911123456', body: 'Hello' }, 'order-42');
  await send(token, { channel: 'email', to: 'bob@example.com', subject: 'Hi', body: 'plain', html: '<p>hi</p>' });
  await send(token, { channel: 'messenger', to: '24681357', body: 'Hello' });
  await send(token, { channel: 'instagram', to: '13572468', body: 'Hello', subject: null });
  const id: string = a.id;
  type List = paths['/v1/messages']['get'];
  const q: List['parameters']['query'] = { status: 'failed', recipient: '+14155550123', limit: 50 };
  type Page = List['responses'][200]['content']['application/json'];
  const page = {} as Page;
  const next: string | null = page.next_cursor;
  const first: string | undefined = page.data[0]?.id;
  type Conversation = components['schemas']['Conversation'];
  const window: string | null = ({} as Conversation).window_expires_at;
  type Sms = paths['/api/send-sms.php']['post']['requestBody']['content']['application/json'];
  const legacy: Sms = { to: '+14155550123', text: 'hi' };
  type Template = paths['/api/send-whatsapp.php']['post']['requestBody']['content']['application/json'];
  const t: Template = { to: '+14155550123', type: 'template', template: 'order_shipped', language: 'en_US' };
  type Replayed = Send['responses'][200]['headers']['Idempotent-Replayed'];
  type Limited = Send['responses'][429]['headers']['Retry-After'];
  type Received = NonNullable<webhooks['message.received']['post']['requestBody']>['content']['application/json'];
  const onEvent = (e: Received) => e.content.kind + e.from + e.contact.id;
  return [id, q, next, first, window, legacy, t, onEvent, {} as Replayed, {} as Limited];
}
`);
    expect(r.output).toBe('');
    expect(r.ok).toBe(true);
  }, 60_000);

  it('refuses to compile invalid requests, each for its own reason', async () => {
    const bad: [what: string, source: string, mentions: string][] = [
      [
        'an email without subject',
        `send('t', { channel: 'email', to: 'bob@example.com', body: 'x' });`,
        "Property 'subject' is missing",
      ],
      [
        'a subject on an SMS',
        `send('t', { channel: 'sms', to: '+14155550123', body: 'x', subject: 'hi' });`,
        'subject',
      ],
      ['an unknown channel', `send('t', { channel: 'fax', to: '+14155550123', body: 'x' });`, '"fax"'],
      [
        'a message without body',
        `send('t', { channel: 'whatsapp', to: '+14155550123' });`,
        "Property 'body' is missing",
      ],
      [
        'an unknown status',
        `const q: paths['/v1/messages']['get']['parameters']['query'] = { status: 'lost' };`,
        '"lost"',
      ],
      [
        'an SMS on the email API',
        `const e: paths['/api/send-email.php']['post']['requestBody']['content']['application/json'] = { to: 'a@b.c', text: 'x' };`,
        'subject',
      ],
    ];
    const first = PRELUDE.split('\n').length;
    const r = await compile(bad.map(([, src]) => `{ ${src} }`).join('\n') + '\n');
    expect(r.ok).toBe(false);
    // One error at each line (tsc: "sample.ts(<line>,<col>): error TS…"), saying what is wrong.
    const errors = [...r.output.matchAll(/sample\.ts\((\d+),\d+\): error TS\d+: ([\s\S]*?)(?=\n\S*sample\.ts\(|$)/g)];
    bad.forEach(([what, , mentions], i) => {
      const at = errors.filter((e) => Number(e[1]) === first + i).map((e) => e[2]);
      expect(at.length, what).toBeGreaterThan(0);
      expect(at.join('\n'), what).toContain(mentions);
    });
  }, 60_000);

  it('passes Redocly’s recommended lint with no error and no warning', async () => {
    const { stdout, stderr } = await run(
      join(BIN, 'redocly'),
      ['lint', join(dir, 'openapi.json'), '--config', join(TOOLS, 'redocly.yaml'), '--format=summary'],
      { env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } },
    );
    const out = stdout + stderr;
    expect(out).toContain('Your API description is valid');
    // The summary has one "error <rule>: <count>" or "warning <rule>: <count>" line per rule broken.
    expect(out).not.toMatch(/^(error|warning)\s+[\w-]+: \d+/m);
  }, 60_000);
});
