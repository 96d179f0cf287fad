import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestServer } from '../helpers/server.js';
import { EVENT_TYPES } from '../../src/core/events.js';
import { call, richPartner, startV1 } from './helpers.js';

// The document is generated from the zod schemas that validate requests. A client that
// knows nothing but the document can find every operation and build a valid send.

let server: TestServer;
let doc: any;

beforeAll(async () => {
  server = await startV1();
  doc = (await call(server, 'GET', '/v1/openapi.json')).body;
});
afterAll(() => server.stop());

const OPERATIONS = [
  'post /api/send-sms.php',
  'post /api/send-email.php',
  'post /api/send-whatsapp.php',
  'post /v1/messages',
  'get /v1/messages',
  'get /v1/messages/{id}',
  'post /v1/messages/{id}/cancel',
  'post /v1/messages/quote',
  'get /v1/conversations',
  'get /v1/conversations/{id}',
  'post /v1/contacts',
  'get /v1/contacts',
  'get /v1/contacts/{id}',
  'post /v1/webhooks',
  'get /v1/webhooks',
  'get /v1/webhooks/{id}',
  'delete /v1/webhooks/{id}',
  'post /v1/webhooks/{id}/rotate-secret',
  'post /v1/webhooks/{id}/test',
  'get /v1/channels',
  'get /v1/templates',
  'get /v1/suppressions',
  'post /v1/suppressions',
  'get /v1/suppressions/{id}',
  'delete /v1/suppressions/{id}',
];

function resolve(schema: any): any {
  return schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema;
}

describe('GET /v1/openapi.json', () => {
  it('describes every operation, with bearer auth and the error responses', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    // Every named schema is used; every reference resolves.
    for (const m of JSON.stringify(doc).matchAll(/"#\/components\/schemas\/(\w+)"/g))
      expect(doc.components.schemas).toHaveProperty(m[1]);
    expect(Object.keys(doc.components.schemas)).not.toContain('ErrorInput');
    const ops = Object.entries(doc.paths).flatMap(([path, item]: [string, any]) =>
      Object.keys(item).map((m) => `${m} ${path}`),
    );
    expect(ops.sort()).toEqual([...OPERATIONS].sort());
    for (const op of OPERATIONS) {
      const [m, p] = op.split(' ');
      const o = doc.paths[p][m];
      expect(o.security, op).toEqual([{ bearerAuth: [] }]);
      expect(o.summary, op).toBeTruthy();
      for (const code of ['401', '403', '429'])
        expect(resolve(o.responses[code].content['application/json'].schema), `${op} ${code}`).toHaveProperty(
          'properties.error',
        );
    }
  });

  it('names the headers every response carries, and the 413, 414 and 415 answers where they happen', () => {
    for (const op of OPERATIONS) {
      const [m, p] = op.split(' ');
      const responses = doc.paths[p][m].responses;
      for (const [code, r] of Object.entries(responses) as [string, any][]) {
        if (code === '414' || code === '405') continue; // answered before the rate limiter
        expect(Object.keys(r.headers), `${op} ${code}`).toEqual(
          expect.arrayContaining(['X-Request-Id', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset']),
        );
      }
      expect(responses['401'].headers).toHaveProperty('WWW-Authenticate');
      expect(responses['429'].headers).toHaveProperty('Retry-After');
      if (m === 'post') expect(Object.keys(responses), op).toEqual(expect.arrayContaining(['413', '415']));
      if (p.includes('{')) expect(Object.keys(responses), op).toContain('414');
    }
    for (const p of ['/v1/messages', '/api/send-sms.php', '/api/send-email.php', '/api/send-whatsapp.php'])
      expect(doc.paths[p].post.responses['200'].headers).toHaveProperty('Idempotent-Replayed');
    for (const name of Object.keys(doc.components.headers)) expect(JSON.stringify(doc)).toContain(`headers/${name}"`);
  });

  it('documents 503 storage_unavailable with Retry-After on every operation that writes, and no code msgd never gives', () => {
    // A quote is a POST that writes nothing: answered from a full disk too.
    const READ_ONLY = ['post /v1/messages/quote'];
    const writing = OPERATIONS.filter((op) => /^(post|put|patch|delete) /.test(op) && !READ_ONLY.includes(op));
    expect(writing.length).toBeGreaterThan(8);
    for (const op of writing) {
      const [m, p] = op.split(' ');
      const r = doc.paths[p][m].responses['503'];
      expect(r, op).toBeTruthy();
      expect(r.description, op).toMatch(/^storage_unavailable: .*nothing of the request was kept/);
      expect(resolve(r.content['application/json'].schema), op).toHaveProperty('properties.error');
      expect(r.headers, op).toHaveProperty('Retry-After');
    }
    // A read needs no write: msgd answers it from a full disk too.
    for (const op of [...OPERATIONS.filter((op) => op.startsWith('get ')), ...READ_ONLY]) {
      const [m, p] = op.split(' ');
      expect(doc.paths[p][m].responses, op).not.toHaveProperty('503');
    }
    // Concurrent retries with one Idempotency-Key wait for the first and get its answer: no 409.
    for (const p of ['/v1/messages', '/api/send-sms.php', '/api/send-email.php', '/api/send-whatsapp.php'])
      expect(doc.paths[p].post.responses, p).not.toHaveProperty('409');
    expect(JSON.stringify(doc)).not.toMatch(/idempotency_key_in_use|service_unavailable/);
  });

  it('has a webhooks section with the body of every event type msgd sends', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_TYPES].sort());
    for (const [type, item] of Object.entries(doc.webhooks) as [string, any][]) {
      const body = resolve(item.post.requestBody.content['application/json'].schema);
      expect(body.properties.event.enum, type).toContain(type);
      expect(body.required).toEqual(expect.arrayContaining(['id', 'event', 'created_at']));
      expect(item.post.parameters.map((h: any) => h.name)).toEqual(
        expect.arrayContaining(['X-Msgd-Signature', 'webhook-signature', 'webhook-timestamp']),
      );
    }
  });

  it('is valid JSON Schema 2020-12 throughout (what OpenAPI 3.1 tools check), and names every operation', () => {
    const ajv = new Ajv2020({ strict: false });
    const schemas: [string, unknown][] = Object.entries(doc.components.schemas);
    for (const [path, item] of Object.entries(doc.paths) as [string, any][]) {
      for (const [m, o] of Object.entries(item) as [string, any][]) {
        const body = o.requestBody?.content?.['application/json']?.schema;
        if (body) schemas.push([`${m} ${path} body`, body]);
        for (const p of o.parameters ?? []) schemas.push([`${m} ${path} ${p.name}`, p.schema]);
        for (const [code, r] of Object.entries(o.responses ?? {}) as [string, any][]) {
          const sch = r.content?.['application/json']?.schema;
          if (sch) schemas.push([`${m} ${path} ${code}`, sch]);
        }
      }
    }
    for (const [name, schema] of schemas)
      expect(ajv.validateSchema(schema as object), `${name}: ${ajv.errorsText()}`).toBe(true);
    expect(JSON.stringify(doc)).not.toContain('"$id"');
    const ids = OPERATIONS.map((op) => {
      const [m, p] = op.split(' ');
      return doc.paths[p][m].operationId;
    });
    for (const id of ids) expect(id).toMatch(/^[a-z][A-Za-z]+$/);
    expect(new Set(ids).size).toBe(OPERATIONS.length);
    expect(doc.paths['/v1/conversations'].get.operationId).toBe('listConversations');
  });

  it('documents request bodies and query parameters from the validating schemas', () => {
    // One object per channel, told apart by channel: email alone requires a subject.
    const send = resolve(doc.paths['/v1/messages'].post.requestBody.content['application/json'].schema);
    expect(send.discriminator.propertyName).toBe('channel');
    expect(Object.keys(send.discriminator.mapping).sort()).toEqual([
      'email',
      'instagram',
      'messenger',
      'sms',
      'whatsapp',
    ]);
    for (const [channel, ref] of Object.entries(send.discriminator.mapping) as [string, string][]) {
      const member = resolve({ $ref: ref });
      expect(member.properties.channel.const).toBe(channel);
      expect(member.required).toEqual(
        expect.arrayContaining(channel === 'email' ? ['channel', 'to', 'body', 'subject'] : ['channel', 'to', 'body']),
      );
      if (channel !== 'email') expect(member.required).not.toContain('subject');
    }
    expect(doc.paths['/v1/messages'].post.parameters.map((p: any) => p.name)).toContain('idempotency-key');
    const q = doc.paths['/v1/conversations'].get.parameters.map((p: any) => p.name);
    expect(q).toEqual(
      expect.arrayContaining([
        'limit',
        'cursor',
        'channel',
        'status',
        'contact',
        'updated_since',
        'updated_before',
        'sort',
      ]),
    );
    const limit = doc.paths['/v1/conversations'].get.parameters.find((p: any) => p.name === 'limit');
    expect(limit.schema).toMatchObject({ maximum: 200, minimum: 1, default: 50 });
    const hook = resolve(doc.paths['/v1/webhooks'].post.requestBody.content['application/json'].schema);
    expect(hook.required).toEqual(['url']);
    const created = resolve(doc.paths['/v1/webhooks'].post.responses['201'].content['application/json'].schema);
    expect(created.required).toContain('secret');
    const listed = doc.paths['/v1/webhooks'].get.responses['200'].content['application/json'].schema;
    expect(JSON.stringify(listed)).not.toContain('secret"');
  });

  it('documents a message’s sent_at (when the customer sent it / when msgd handed it over) beside created_at', () => {
    const message = resolve(doc.paths['/v1/messages/{id}'].get.responses['200'].content['application/json'].schema);
    expect(message.required).toEqual(expect.arrayContaining(['sent_at', 'created_at']));
    expect(JSON.stringify(message.properties.sent_at)).toContain('null');
    expect(message.properties.sent_at.description).toMatch(/when the customer sent it/);
  });

  it('a client driven only by the document sends on every channel', async () => {
    const p = await richPartner(server.ctx, 1);
    const op = doc.paths['/v1/messages'].post;
    const union = resolve(op.requestBody.content['application/json'].schema);
    const example: Record<string, Record<string, string>> = {
      sms: { to: '+14155550123' },
      whatsapp: { to: '+14155550123' },
      email: { to: 'bob@example.com', subject: 'From the document' },
      messenger: { to: '1234567' },
      instagram: { to: '7654321' },
    };
    for (const [channel, ref] of Object.entries(union.discriminator.mapping) as [string, string][]) {
      const schema = resolve({ $ref: ref });
      const body = { channel, body: 'hello', ...example[channel] };
      for (const k of schema.required) expect(body).toHaveProperty(k);
      const r = await call(server, 'POST', '/v1/messages', { token: p.token, body });
      expect(r.status, channel).toBe(200);
      const ok = resolve(op.responses['200'].content['application/json'].schema);
      for (const k of ok.required) expect(r.body).toHaveProperty(k);
    }
  });
});

describe('GET /v1/docs', () => {
  it('is a self-contained HTML page listing every operation', async () => {
    const r = await call(server, 'GET', '/v1/docs');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    for (const op of OPERATIONS) expect(r.text).toContain(op.split(' ')[1]);
    expect(r.text).toContain('MessageCreate');
    expect(r.text).toContain('/api/send-whatsapp.php');
    for (const type of EVENT_TYPES) expect(r.text).toContain(type);
    // Nothing loaded from anywhere: no scripts, stylesheets, images or outside links.
    expect(r.text).not.toMatch(/<script|<link|<img|<iframe|src=|href="(?!#|openapi\.json)/i);
    expect(r.headers.get('content-security-policy')).toContain("default-src 'none'");
  });
});
