import { Ajv2020 } from 'ajv/dist/2020.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disableEndpointIn, MAX_ENDPOINTS_PER_PARTNER } from '../../src/core/endpoints.js';
import { createInboundIn } from '../../src/core/messages.js';
import { markDeletedIn } from '../../src/core/message-status.js';
import { sql } from '../../src/db/sql.js';
import { suspendPartner } from '../../src/core/partners.js';
import { serverStore, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { call, richPartner, startV1, type Res } from './helpers.js';

// The document and the API agree: the per-channel union the document shows for POST
// /v1/messages refuses exactly the requests the API refuses with its one 400 (on a corpus of
// requests), every real response below is one the document lists for its operation, with its
// body valid against the documented schema and the documented headers present, and every
// event msgd stored for delivery is valid against the webhooks section.

/**
 * A storage that refuses writes until the returned function runs. SQLite: query_only, which
 * answers every write SQLITE_READONLY. PostgreSQL: a trigger on every table of msgd's that
 * answers each write 25006 read_only_sql_transaction, as a server turned read-only does, at
 * once on the sessions msgd has open.
 */
async function refuseWrites(): Promise<() => Promise<void>> {
  if (serverStore === 'sqlite') {
    server.ctx.db.sqlite.pragma('query_only = ON');
    return async () => {
      server.ctx.db.sqlite.pragma('query_only = OFF');
    };
  }
  const { databaseUrl, pgAdminUrl, withClient } = await import('../pg/helpers.js');
  const name = decodeURIComponent(new URL(server.rt.config.database.url!).pathname.slice(1));
  // One table a statement: a trigger made locks its table until its statement commits, and
  // several at once in one transaction could deadlock with msgd's own transactions.
  const eachTable = (statement: (table: string) => string) =>
    withClient(databaseUrl(pgAdminUrl(), name), async (c) => {
      const tables = await c.query<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public'`);
      for (const { t } of tables.rows) await c.query(statement(pg.escapeIdentifier(t)));
    });
  await withClient(databaseUrl(pgAdminUrl(), name), (c) =>
    c.query(`CREATE OR REPLACE FUNCTION test_refuse_write() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'cannot execute % in a read-only transaction', TG_OP USING ERRCODE = '25006'; END $$`),
  );
  await eachTable(
    (t) =>
      `CREATE TRIGGER test_refuse_write BEFORE INSERT OR UPDATE OR DELETE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION test_refuse_write()`,
  );
  return async () => {
    await eachTable((t) => `DROP TRIGGER IF EXISTS test_refuse_write ON ${t}`);
  };
}

let server: TestServer;
let doc: any;
let token: string;
let partnerId: string;
let ajv: Ajv2020;

beforeAll(async () => {
  server = await startV1({
    'server.bodyLimitBytes': 64 * 1024,
    'webhooksOut.allowPrivateTargets': true,
    'webhooksOut.retryScheduleMs': [0],
  });
  doc = (await call(server, 'GET', '/v1/openapi.json')).body;
  const p = await richPartner(server.ctx, 1, { balance: '1000' });
  token = p.token;
  partnerId = p.partnerId;
  ajv = new Ajv2020({ strict: false, allErrors: true });
  // The document is the root every #/components/... reference resolves in.
  ajv.addSchema({ ...doc, $id: 'openapi' }, 'openapi');
});
afterAll(() => server.stop());

function validator(schema: any) {
  return ajv.compile({ $ref: `openapi#${pointerOf(schema)}` });
}
const pointers = new Map<any, string>();
function pointerOf(schema: any): string {
  if (!pointers.size) {
    const walk = (v: any, at: string) => {
      if (!v || typeof v !== 'object') return;
      pointers.set(v, at);
      for (const [k, x] of Object.entries(v)) walk(x, `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`);
    };
    walk(doc, '');
  }
  const p = pointers.get(schema);
  if (p === undefined) throw new Error('not a schema of the document');
  return p;
}

const long = (n: number, c = 'a') => c.repeat(n);
const PHONE = '+14155550123';

// [name, body]: every rule the union can state, each side of it.
const CORPUS: [string, unknown][] = [
  ['sms', { channel: 'sms', to: PHONE, body: 'hi' }],
  ['whatsapp', { channel: 'whatsapp', to: PHONE, body: 'hi' }],
  ['messenger', { channel: 'messenger', to: '24681357', body: 'hi' }],
  ['instagram', { channel: 'instagram', to: '13572468', body: 'hi' }],
  ['email', { channel: 'email', to: 'bob@example.com', subject: 'Hi', body: 'plain' }],
  ['email with html', { channel: 'email', to: 'bob@example.com', subject: 'Hi', body: 'p', html: '<p>x</p>' }],
  ['email, html null', { channel: 'email', to: 'bob@example.com', subject: 'Hi', body: 'p', html: null }],
  ['email, body only spaces', { channel: 'email', to: 'bob@example.com', subject: 'Hi', body: '   ' }],
  ['sms, subject and html null', { channel: 'sms', to: PHONE, body: 'hi', subject: null, html: null }],
  ['sms, an unknown field', { channel: 'sms', to: PHONE, body: 'hi', extra: 1 }],
  ['sms at its limit', { channel: 'sms', to: PHONE, body: long(1600) }],
  ['email subject at its limit', { channel: 'email', to: 'bob@example.com', subject: long(998), body: 'p' }],
  ['nothing', {}],
  ['an unknown channel', { channel: 'fax', to: PHONE, body: 'hi' }],
  ['channel null', { channel: null, to: PHONE, body: 'hi' }],
  ['sms without to', { channel: 'sms', body: 'hi' }],
  ['sms without body', { channel: 'sms', to: PHONE }],
  ['sms, body empty', { channel: 'sms', to: PHONE, body: '' }],
  ['sms, body null', { channel: 'sms', to: PHONE, body: null }],
  ['sms, body only spaces', { channel: 'sms', to: PHONE, body: '  \t ' }],
  ['sms, body a number', { channel: 'sms', to: PHONE, body: 5 }],
  ['sms, to a number', { channel: 'sms', to: 14155550123, body: 'hi' }],
  ['sms, to empty', { channel: 'sms', to: '', body: 'hi' }],
  ['sms over its limit', { channel: 'sms', to: PHONE, body: long(1601) }],
  ['sms with a subject', { channel: 'sms', to: PHONE, body: 'hi', subject: 'x' }],
  ['sms with html', { channel: 'sms', to: PHONE, body: 'hi', html: '<p>x</p>' }],
  ['whatsapp over its limit', { channel: 'whatsapp', to: PHONE, body: long(4097) }],
  ['messenger over its limit', { channel: 'messenger', to: '24681357', body: long(2001) }],
  ['instagram over its limit', { channel: 'instagram', to: '13572468', body: long(1001) }],
  ['messenger, to not digits', { channel: 'messenger', to: 'abc', body: 'hi' }],
  ['instagram, to not digits', { channel: 'instagram', to: '12a', body: 'hi' }],
  ['email without subject', { channel: 'email', to: 'bob@example.com', body: 'p' }],
  ['email, subject null', { channel: 'email', to: 'bob@example.com', subject: null, body: 'p' }],
  ['email, subject empty', { channel: 'email', to: 'bob@example.com', subject: '', body: 'p' }],
  ['email, subject only spaces', { channel: 'email', to: 'bob@example.com', subject: '   ', body: 'p' }],
  ['email, subject two lines', { channel: 'email', to: 'bob@example.com', subject: 'a\nb', body: 'p' }],
  ['email, subject over its limit', { channel: 'email', to: 'bob@example.com', subject: long(999), body: 'p' }],
  ['email, html empty', { channel: 'email', to: 'bob@example.com', subject: 'Hi', body: 'p', html: '' }],
  ['email, html only spaces', { channel: 'email', to: 'bob@example.com', subject: 'Hi', body: 'p', html: '  ' }],
  ['email without body', { channel: 'email', to: 'bob@example.com', subject: 'Hi' }],
];

describe('POST /v1/messages: the documented union and the validator agree', () => {
  it.each(CORPUS)('%s', async (_name, body) => {
    const union = doc.paths['/v1/messages'].post.requestBody.content['application/json'].schema;
    const documented = validator(union)(body);
    const r = await call(server, 'POST', '/v1/messages', { token, body });
    expect(r.status === 400, `document says ${documented ? 'valid' : 'invalid'}, API answered ${r.text}`).toBe(
      !documented,
    );
    if (!documented) expect(r.body.error.code).toBe('invalid_request');
    else expect(r.status).toBe(200);
  });

  it('still lists every problem of a request at once', async () => {
    const r = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'sms', to: 'nope', body: '', subject: 'x' },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.details.map((d: any) => d.field).sort()).toEqual(['body', 'subject', 'to']);
  });
});

/** The response must be one the document lists for the operation, with its body and headers. */
const seen = new Set<string>();
function expectDocumented(method: string, template: string, r: Res) {
  seen.add(`${method.toLowerCase()} ${template} ${r.status}`);
  const op = doc.paths[template]?.[method.toLowerCase()];
  expect(op, `${method} ${template} is documented`).toBeTruthy();
  const documented = op.responses[String(r.status)];
  expect(documented, `${method} ${template} documents ${r.status}: ${r.text.slice(0, 200)}`).toBeTruthy();
  const schema = documented.content?.['application/json']?.schema;
  if (schema) {
    const v = validator(schema);
    expect(v(r.body), `${method} ${template} ${r.status}: ${ajv.errorsText(v.errors)}`).toBe(true);
  } else {
    expect(r.text, `${method} ${template} ${r.status} has no body`).toBe('');
  }
  for (const name of Object.keys(documented.headers ?? {})) {
    if (name === 'Idempotent-Replayed') continue; // only on a replay: checked below
    expect(r.headers.get(name), `${method} ${template} ${r.status} header ${name}`).not.toBeNull();
  }
}

describe('real responses are the documented ones', () => {
  it('for every operation, its answers and errors', async () => {
    const p2 = await richPartner(server.ctx, 2);
    const noScope = (await richPartner(server.ctx, 3, { scopes: 'channels:read' })).token;
    const send = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'sms', to: PHONE, body: 'documented' },
      headers: { 'idempotency-key': 'doc-1' },
    });
    expectDocumented('POST', '/v1/messages', send);
    const replay = await call(server, 'POST', '/v1/messages', {
      token,
      body: { channel: 'sms', to: PHONE, body: 'documented' },
      headers: { 'idempotency-key': 'doc-1' },
    });
    expectDocumented('POST', '/v1/messages', replay);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const msg = send.body.id;
    await waitFor(
      async () => (await call(server, 'GET', `/v1/messages/${msg}`, { token })).body.status === 'delivered',
      'the message delivered',
      5000,
    );
    const hook = await call(server, 'POST', '/v1/webhooks', { token, body: { url: 'https://127.0.0.1:9/hook' } });
    expect(hook.status).toBe(201);
    const conv = (await call(server, 'GET', `/v1/messages/${msg}`, { token })).body.conversation_id;
    const contact = (await call(server, 'POST', '/v1/contacts', { token, body: { phone: '+14155550199' } })).body.id;
    const huge = JSON.stringify({ channel: 'sms', to: PHONE, body: long(70 * 1024) });
    const sup = await call(server, 'POST', '/v1/suppressions', {
      token,
      body: { channel: 'sms', address: '+14155550166', reason: 'opt_out_keyword' },
    });
    expectDocumented('POST', '/v1/suppressions', sup);
    const cases: [string, string, string, Parameters<typeof call>[3]?][] = [
      ['POST', '/api/send-sms.php', '/api/send-sms.php', { token, body: { to: PHONE, text: 'legacy' } }],
      ['POST', '/api/send-sms.php', '/api/send-sms.php', { token, body: { to: PHONE } }],
      ['POST', '/api/send-sms.php', '/api/send-sms.php', { token: 'msgd_live_nope', body: { to: PHONE, text: 'x' } }],
      [
        'POST',
        '/api/send-email.php',
        '/api/send-email.php',
        { token, body: { to: 'a@example.com', subject: 'S', html: '<p>h</p>' } },
      ],
      ['POST', '/api/send-email.php', '/api/send-email.php', { token, body: huge }],
      ['POST', '/api/send-whatsapp.php', '/api/send-whatsapp.php', { token, body: { to: PHONE, text: 'wa' } }],
      [
        'POST',
        '/api/send-whatsapp.php',
        '/api/send-whatsapp.php',
        { token, body: 'x=1', headers: { 'content-type': 'text/plain' } },
      ],
      ['POST', '/v1/messages', '/v1/messages', { token, body: { channel: 'sms' } }],
      ['POST', '/v1/messages', '/v1/messages', { token: null, body: { channel: 'sms' } }],
      ['POST', '/v1/messages', '/v1/messages', { token: noScope, body: { channel: 'sms', to: PHONE, body: 'x' } }],
      ['POST', '/v1/messages', '/v1/messages', { token, body: huge }],
      ['POST', '/v1/messages', '/v1/messages', { token, body: '{}', headers: { 'content-type': 'text/plain' } }],
      ['GET', '/v1/messages', '/v1/messages', { token }],
      ['GET', '/v1/messages?status=nope', '/v1/messages', { token }],
      ['GET', `/v1/messages/${msg}`, '/v1/messages/{id}', { token }],
      ['GET', `/v1/messages/${msg}`, '/v1/messages/{id}', { token: p2.token }],
      ['GET', `/v1/messages/msg_${long(300, 'x')}`, '/v1/messages/{id}', { token }],
      ['GET', '/v1/conversations', '/v1/conversations', { token }],
      ['GET', `/v1/conversations/${conv}`, '/v1/conversations/{id}', { token }],
      ['GET', '/v1/conversations?limit=0', '/v1/conversations', { token }],
      ['POST', '/v1/contacts', '/v1/contacts', { token, body: { phone: '+14155550199', name: 'Ann' } }],
      ['POST', '/v1/contacts', '/v1/contacts', { token, body: {} }],
      ['GET', '/v1/contacts', '/v1/contacts', { token }],
      ['GET', `/v1/contacts/${contact}`, '/v1/contacts/{id}', { token }],
      ['GET', '/v1/webhooks', '/v1/webhooks', { token }],
      ['POST', '/v1/webhooks', '/v1/webhooks', { token, body: { url: 'http://example.com/' } }],
      ['GET', `/v1/webhooks/${hook.body.id}`, '/v1/webhooks/{id}', { token }],
      ['POST', `/v1/webhooks/${hook.body.id}/rotate-secret`, '/v1/webhooks/{id}/rotate-secret', { token }],
      ['POST', `/v1/webhooks/${hook.body.id}/test`, '/v1/webhooks/{id}/test', { token }],
      ['DELETE', `/v1/webhooks/${hook.body.id}`, '/v1/webhooks/{id}', { token }],
      ['GET', '/v1/channels', '/v1/channels', { token }],
      ['GET', '/v1/templates?category=utility&status=approved', '/v1/templates', { token }],
      ['GET', '/v1/templates?category=promotional', '/v1/templates', { token }],
      [
        'POST',
        '/v1/suppressions',
        '/v1/suppressions',
        { token, body: { channel: 'sms', address: '+14155550166', reason: 'opt_out_keyword' } },
      ],
      ['POST', '/v1/suppressions', '/v1/suppressions', { token, body: { channel: 'sms', address: 'nope' } }],
      ['GET', '/v1/suppressions?channel=sms', '/v1/suppressions', { token }],
      ['GET', `/v1/suppressions/${sup.body.id}`, '/v1/suppressions/{id}', { token }],
      ['GET', `/v1/suppressions/${sup.body.id}`, '/v1/suppressions/{id}', { token: p2.token }],
      // recipient_suppressed, one of the documented 400s.
      ['POST', '/api/send-sms.php', '/api/send-sms.php', { token, body: { to: '+14155550166', text: 'x' } }],
      ['POST', '/v1/messages', '/v1/messages', { token, body: { channel: 'sms', to: '+14155550166', body: 'x' } }],
      ['DELETE', `/v1/suppressions/${sup.body.id}`, '/v1/suppressions/{id}', { token }],
      ['DELETE', `/v1/suppressions/${sup.body.id}?consent_confirmed=true`, '/v1/suppressions/{id}', { token }],
    ];
    expectDocumented('POST', '/v1/webhooks', hook);
    for (const [method, path, template, opts] of cases)
      expectDocumented(method, template, await call(server, method, path, opts));

    // 402 and 403 partner_suspended, then 429 past a partner's own limit.
    const poor = await richPartner(server.ctx, 4, { balance: '0' });
    expectDocumented(
      'POST',
      '/v1/messages',
      await call(server, 'POST', '/v1/messages', { token: poor.token, body: { channel: 'sms', to: PHONE, body: 'x' } }),
    );
    await suspendPartner(server.ctx, poor.partnerId, 'test');
    expectDocumented('GET', '/v1/channels', await call(server, 'GET', '/v1/channels', { token: poor.token }));
    const limited = await richPartner(server.ctx, 5);
    await server.ctx.store.run(sql`UPDATE partners SET rate_limit_per_minute = 1 WHERE id = ${limited.partnerId}`);
    let last: Res | undefined;
    for (let i = 0; i < 5 && last?.status !== 429; i++)
      last = await call(server, 'GET', '/v1/channels', { token: limited.token });
    expect(last!.status).toBe(429);
    expectDocumented('GET', '/v1/channels', last!);
  });

  // Every operation, each answer: a few hundred requests, longer than a test's default on a busy machine.
  it('every answer the document lists happens, on every operation', async () => {
    const ops: [string, string, any][] = Object.entries(doc.paths).flatMap(([path, item]: [string, any]) =>
      Object.entries(item).map(([m, op]) => [m.toUpperCase(), path, op] as [string, string, any]),
    );
    const hook = (await call(server, 'POST', '/v1/webhooks', { token, body: { url: 'https://127.0.0.1:9/h2' } })).body
      .id;
    const ids: Record<string, string> = {
      '/v1/messages/{id}': 'msg_01kzzzzzzzzzzzzzzzzzzzzzzz',
      '/v1/conversations/{id}': 'conv_01kzzzzzzzzzzzzzzzzzzzzzzz',
      '/v1/contacts/{id}': 'ct_01kzzzzzzzzzzzzzzzzzzzzzzz',
    };
    const sup = (
      await call(server, 'POST', '/v1/suppressions', { token, body: { channel: 'email', address: 'gone@example.com' } })
    ).body.id;
    const concrete = (path: string, id?: string) =>
      path.replace(
        '{id}',
        id ?? ids[path] ?? (path.startsWith('/v1/webhooks') ? hook : path.startsWith('/v1/suppressions') ? sup : 'x'),
      );
    const VALID: Record<string, unknown> = {
      '/api/send-sms.php': { to: PHONE, text: 'x' },
      '/api/send-email.php': { to: 'a@example.com', subject: 'S', html: '<p>h</p>' },
      '/api/send-whatsapp.php': { to: PHONE, text: 'x' },
      '/v1/messages': { channel: 'sms', to: PHONE, body: 'x' },
      '/v1/messages/quote': { channel: 'sms', to: PHONE, body: 'x' },
      '/v1/contacts': { phone: '+14155550177' },
      '/v1/webhooks': { url: 'https://127.0.0.1:9/h3' },
      '/v1/suppressions': { channel: 'sms', address: '+14155550177' },
    };
    const noScope = (await richPartner(server.ctx, 6, { scopes: 'contacts:read' })).token;
    const channelsOnly = (await richPartner(server.ctx, 7, { scopes: 'channels:read' })).token;
    const poor = (await richPartner(server.ctx, 8, { balance: '0' })).token;
    const limited = await richPartner(server.ctx, 9);
    await server.ctx.store.run(sql`UPDATE partners SET rate_limit_per_minute = 1 WHERE id = ${limited.partnerId}`);
    await call(server, 'GET', '/v1/channels', { token: limited.token });
    const huge = JSON.stringify({ to: PHONE, text: long(70 * 1024) });
    for (const [m, path, op] of ops) {
      const check = async (opts: Parameters<typeof call>[3], id?: string, query = '') =>
        expectDocumented(m, path, await call(server, m, concrete(path, id) + query, opts));
      const body = m === 'POST' ? (VALID[path] ?? undefined) : undefined;
      await check({ token: null, body });
      await check({ token: path.startsWith('/v1/contacts') || path === '/v1/channels' ? channelsOnly : noScope, body });
      if (path === '/v1/channels') await check({ token: noScope });
      await check({ token: limited.token, body });
      if (m === 'POST') {
        await check({ token, body: huge });
        await check({ token, body: '{}', headers: { 'content-type': 'text/plain' } });
        if (VALID[path]) await check({ token, body: path === '/v1/webhooks' ? { url: 'http://x' } : {} });
      }
      if (m === 'GET' && !path.includes('{id}')) await check({ token }, undefined, '?limit=0');
      if (path === '/v1/conversations/{id}') await check({ token }, undefined, '?limit=0');
      if (path.includes('{id}')) {
        await check({ token }, `x_${long(300)}`);
        await check(
          { token },
          path.startsWith('/v1/webhooks')
            ? 'whe_01kzzzzzzzzzzzzzzzzzzzzzzz'
            : path.startsWith('/v1/suppressions')
              ? 'sup_01kzzzzzzzzzzzzzzzzzzzzzzz'
              : undefined,
        );
      }
      if (op.responses['402']) await check({ token: poor, body });
      if (op.responses['422']) {
        const key = { 'idempotency-key': `k-${path}` };
        await check({ token, body, headers: key });
        await check({ token, body: { ...(body as object), extra: 'changed' }, headers: key });
      }
      if (op.responses['405']) expectDocumented(m, path, await call(server, 'GET', path, { token }));
      if (op.responses['503']) {
        const allowWrites = await refuseWrites();
        try {
          const r = await call(server, m, concrete(path), { token, body });
          expect(r.body?.error?.code, `${m} ${path}: ${r.text}`).toBe('storage_unavailable');
          expect(r.headers.get('retry-after'), `${m} ${path}`).toBe('30');
          expectDocumented(m, path, r);
        } finally {
          await allowWrites();
        }
      }
      if (path === '/v1/contacts' && m === 'POST') {
        await check({ token, body: { phone: '+14155550188' } });
        await check({ token, body: { phone: '+14155550188', email: 'other@example.com' } });
        await call(server, 'POST', '/v1/contacts', { token, body: { email: 'taken@example.com' } });
        await check({ token, body: { phone: '+14155550188', email: 'taken@example.com' } });
      }
    }
    // 409 on webhooks: a disabled endpoint's test, and one endpoint more than a partner may have.
    await server.ctx.store.transaction((tx) => disableEndpointIn(server.ctx, tx, hook, 'test'));
    expectDocumented(
      'POST',
      '/v1/webhooks/{id}/test',
      await call(server, 'POST', `/v1/webhooks/${hook}/test`, { token }),
    );
    const full = (await richPartner(server.ctx, 10)).token;
    for (let i = 0; i <= MAX_ENDPOINTS_PER_PARTNER; i++)
      expectDocumented(
        'POST',
        '/v1/webhooks',
        await call(server, 'POST', '/v1/webhooks', { token: full, body: { url: `https://127.0.0.1:9/f${i}` } }),
      );
    // 200 and 409 on cancel: a scheduled message canceled, then canceled again.
    const later = new Date(Date.now() + 3_600_000).toISOString();
    const scheduled = (
      await call(server, 'POST', '/v1/messages', {
        token,
        body: { channel: 'sms', to: PHONE, body: 'x', send_at: later },
      })
    ).body.id;
    for (let i = 0; i < 2; i++)
      expectDocumented(
        'POST',
        '/v1/messages/{id}/cancel',
        await call(server, 'POST', `/v1/messages/${scheduled}/cancel`, { token }),
      );
    // 200 on a quote: one the send would accept, and one it would refuse (as a refusal in the 200).
    for (const body of [
      { channel: 'sms', to: PHONE, body: 'x' },
      { channel: 'sms', to: PHONE, body: 'x', send_at: 'tomorrow' },
    ])
      expectDocumented('POST', '/v1/messages/quote', await call(server, 'POST', '/v1/messages/quote', { token, body }));
    const missing: string[] = [];
    for (const [m, path, op] of ops)
      for (const code of Object.keys(op.responses))
        if (!seen.has(`${m.toLowerCase()} ${path} ${code}`)) missing.push(`${m} ${path} ${code}`);
    expect(missing).toEqual([]);
  }, 120_000);

  it('every event stored for delivery is valid against the webhooks section', async () => {
    // An inbound message, as inbound processing stores it.
    const sms = (await server.ctx.store.get<{ id: string; gateway_id: string; sender: string }>(
      sql`SELECT id, gateway_id, sender FROM channels WHERE partner_id = ${partnerId} AND type = 'sms'`,
    ))!;
    await server.ctx.store.transaction((tx) =>
      createInboundIn(tx, server.ctx, {
        partnerId,
        channel: { id: sms.id, type: 'sms', gatewayId: sms.gateway_id, sender: sms.sender },
        from: PHONE,
        providerMessageId: 'SM1',
        content: { kind: 'text', text: 'a reply' },
        occurredAt: Date.now(),
      }),
    );
    // An Instagram-style story reply, then unsent by the customer: message.deleted.
    await server.ctx.store.transaction(async (tx) => {
      const { message } = await createInboundIn(tx, server.ctx, {
        partnerId,
        channel: { id: sms.id, type: 'sms', gatewayId: sms.gateway_id, sender: sms.sender },
        from: PHONE,
        providerMessageId: 'SM2',
        content: { kind: 'text', text: 'nice', reply_to_story: { id: '17999', url: 'https://cdn.example/s.jpg' } },
        occurredAt: Date.now(),
      });
      expect(await markDeletedIn(tx, server.ctx, message, Date.now())).toBe(true);
    });
    const events = await server.ctx.store.all<{ type: string; payload: string }>(
      sql`SELECT type, payload FROM events WHERE partner_id = ${partnerId}`,
    );
    const types = new Set(events.map((e) => e.type));
    expect([...types]).toEqual(expect.arrayContaining(['suppression.created', 'suppression.deleted']));
    // The sends above were delivered by the sandbox; the test endpoint got its test event.
    expect([...types]).toEqual(
      expect.arrayContaining([
        'message.received',
        'message.deleted',
        'message.sent',
        'message.delivered',
        'message.canceled',
        'webhook.test',
      ]),
    );
    for (const e of events) {
      const schema = doc.webhooks[e.type].post.requestBody.content['application/json'].schema;
      const v = validator(schema);
      expect(v(JSON.parse(e.payload)), `${e.type}: ${ajv.errorsText(v.errors)}`).toBe(true);
    }
  });
});
