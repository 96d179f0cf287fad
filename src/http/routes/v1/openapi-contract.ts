import { z } from 'zod';
import { EVENT_SCHEMAS } from '../../schemas/events.js';
import { LIMITS } from '../../schemas/send.js';

// What the route schemas cannot say by themselves, added to the generated document so it is
// the whole contract: the legacy send API's operations, the headers every response carries,
// the 413/414/415 answers of the body and URL checks, the 503 of a write the disk refuses, a
// discriminator for the per-channel request union, and the `webhooks` section with every
// event msgd POSTs to partner endpoints.

type Doc = Record<string, any>;

const ERROR = { $ref: '#/components/schemas/Error' };
const json = (schema: unknown) => ({ 'application/json': { schema } });
const toSchema = (s: z.ZodType) => {
  const { $schema: _drop, ...rest } = z.toJSONSchema(s, { target: 'draft-2020-12', io: 'input', reused: 'inline' });
  return rest;
};

const HEADERS: Record<string, Doc> = {
  XRequestId: {
    description: 'the request id: yours if you sent a sane X-Request-Id, else req_…; quote it when asking for help',
    schema: { type: 'string' },
  },
  RateLimitLimit: {
    description: 'requests per minute for this token (or client address)',
    schema: { type: 'integer' },
  },
  RateLimitRemaining: { description: 'requests left right now', schema: { type: 'integer' } },
  RateLimitReset: { description: 'seconds until the allowance is full again', schema: { type: 'integer' } },
  RetryAfter: { description: 'seconds to wait before trying again', schema: { type: 'integer' } },
  IdempotentReplayed: {
    description: 'true when this is the stored answer to an earlier request with the same Idempotency-Key',
    schema: { type: 'string', enum: ['true'] },
  },
  Allow: { description: 'the methods the path takes', schema: { type: 'string' } },
  WWWAuthenticate: {
    description: 'Bearer (RFC 6750), with error="invalid_token" and an error_description when a token was given',
    schema: { type: 'string' },
  },
};

const ref = (name: string) => ({ $ref: `#/components/headers/${name}` });
const COMMON_HEADERS = {
  'X-Request-Id': ref('XRequestId'),
  'RateLimit-Limit': ref('RateLimitLimit'),
  'RateLimit-Remaining': ref('RateLimitRemaining'),
  'RateLimit-Reset': ref('RateLimitReset'),
};

/** Every operation that writes can meet a disk that refuses the write. */
const STORAGE_UNAVAILABLE =
  'storage_unavailable: msgd’s disk refuses writes (it may be full); nothing of the request was kept (no message, ' +
  'no debit): send it again after Retry-After';

const BODY_ERRORS: Record<string, string> = {
  '413': 'payload_too_large: the body is over the server’s limit',
  '415': 'unsupported_media_type: not application/json, a charset other than UTF-8, or a compressed body',
};

// --- the legacy send API ------------------------------------------------------------------

const phone = z.string().describe('E.164 with a leading +, e.g. +14155550123; a valid number for its country');
const text = (max: number) => z.string().min(1).describe(`not only whitespace; at most ${max} UTF-16 code units`);
const nullish = <T extends z.ZodType>(s: T) => s.nullable().optional();

const sendSms = z.object({ to: phone, text: text(LIMITS.smsText) });
const sendEmail = z.object({
  to: z.string().describe('one email address'),
  subject: z.string().min(1).max(LIMITS.subject).describe('one line, not only whitespace'),
  html: z.string().min(1).describe(`at most ${LIMITS.htmlBytes} bytes of UTF-8`),
  text: nullish(z.string()).describe('a plain-text part'),
  from_name: nullish(z.string().max(100)),
  reply_to: nullish(z.string()).describe('an email address'),
});
const templateObject = z.object({
  name: z.string(),
  language: z.string().describe('e.g. en_US'),
  parameters: nullish(z.array(z.string())),
  components: nullish(z.array(z.record(z.string(), z.unknown()))),
});
const sendWhatsapp = z.union([
  z
    .object({
      channel: nullish(z.literal('whatsapp')),
      to: phone,
      type: nullish(z.literal('text')),
      text: text(LIMITS.whatsappText),
    })
    .describe(
      'a WhatsApp text: refused outside the 24-hour customer-service window (400 outside_customer_service_window)',
    ),
  z
    .object({
      channel: nullish(z.literal('whatsapp')),
      to: phone,
      type: z.literal('template'),
      template: z.union([z.string(), templateObject]),
      language: nullish(z.string()),
      parameters: nullish(z.array(z.string())),
      components: nullish(z.array(z.record(z.string(), z.unknown()))),
    })
    .describe('a WhatsApp template: allowed at any time'),
  z
    .object({ channel: z.literal('messenger'), to: z.string().describe('the PSID'), text: text(LIMITS.messengerText) })
    .describe('Messenger'),
  z
    .object({
      channel: z.literal('instagram'),
      to: z.string().describe('the IGSID'),
      text: z.string().min(1).describe(`at most ${LIMITS.instagramText} bytes of UTF-8`),
    })
    .describe('Instagram'),
]);
const queued = z.object({ id: z.string().describe('msg_…'), status: z.literal('queued') });

const LEGACY: [path: string, operationId: string, summary: string, body: z.ZodType][] = [
  ['/api/send-sms.php', 'sendSms', 'Send an SMS (legacy send API)', sendSms],
  ['/api/send-email.php', 'sendEmail', 'Send an email (legacy send API)', sendEmail],
  [
    '/api/send-whatsapp.php',
    'sendWhatsapp',
    'Send on WhatsApp, Messenger or Instagram (legacy send API)',
    sendWhatsapp,
  ],
];

function legacyPaths(): Doc {
  const errors: Record<string, string> = {
    '400':
      'invalid_request, invalid_json, outside_customer_service_window or template_invalid (a WhatsApp template the catalogue refuses); details list every field problem',
    '401': 'missing or invalid bearer token',
    '402': 'insufficient_balance',
    '403': 'partner_suspended, insufficient_scope (messages:send) or channel_not_assigned',
    '405': 'method_not_allowed: only POST (Allow: POST)',
    '422': 'idempotency_key_reused with a different body',
    '429': 'rate_limited',
  };
  const paths: Doc = {};
  for (const [path, operationId, summary, body] of LEGACY) {
    paths[path] = {
      post: {
        tags: ['send API'],
        operationId,
        summary,
        description:
          'Scope messages:send. Checks in this order: 401, 403 (suspended, scope, channel), 402 when balance and credit ' +
          'are exhausted, 400 invalid payload, 400 outside_customer_service_window (WhatsApp, Messenger, Instagram), ' +
          '400 template_invalid (a WhatsApp template not APPROVED in the catalogue or whose parameters do not fit), 402 ' +
          'when this message costs more than is left. Honours Idempotency-Key. See docs/send-api.md.',
        security: [{ bearerAuth: [] }],
        parameters: [
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            description: 'retries with the same key and body get the first answer and are charged once',
            schema: { type: 'string', minLength: 1, maxLength: 255 },
          },
        ],
        requestBody: { required: true, content: json(toSchema(body)) },
        responses: {
          '200': { description: 'accepted and queued; the price is debited', content: json(toSchema(queued)) },
          ...Object.fromEntries(Object.entries(errors).map(([c, d]) => [c, { description: d, content: json(ERROR) }])),
        },
      },
    };
  }
  return paths;
}

// --- headers and transport answers on every operation --------------------------------------

const SEND_OPERATIONS = new Set(['sendMessage', 'sendSms', 'sendEmail', 'sendWhatsapp']);
/** POSTs that write nothing, so a disk that refuses writes does not stop them (no 503). */
const READ_ONLY_POSTS = new Set(['quoteMessage']);

function completeResponses(op: Doc, method: string, path: string) {
  const responses = (op.responses ??= {}) as Record<string, Doc>;
  if (['post', 'put', 'patch'].includes(method)) {
    for (const [code, d] of Object.entries(BODY_ERRORS)) responses[code] ??= { description: d, content: json(ERROR) };
  }
  if (['post', 'put', 'patch', 'delete'].includes(method) && !READ_ONLY_POSTS.has(op.operationId))
    responses['503'] ??= { description: STORAGE_UNAVAILABLE, content: json(ERROR) };
  if (path.includes('{'))
    responses['414'] ??= {
      description: 'invalid_request: a path segment is far longer than any id',
      content: json(ERROR),
    };
  for (const [code, r] of Object.entries(responses)) {
    // The router answers 414, and the send paths' 405, before the rate limiter counts the request.
    r.headers =
      code === '414'
        ? { 'X-Request-Id': ref('XRequestId') }
        : code === '405'
          ? { 'X-Request-Id': ref('XRequestId'), Allow: ref('Allow') }
          : { ...COMMON_HEADERS, ...(r.headers ?? {}) };
    if (code === '401') r.headers['WWW-Authenticate'] = ref('WWWAuthenticate');
    if (code === '429' || code === '503') r.headers['Retry-After'] = ref('RetryAfter');
    if (code === '200' && SEND_OPERATIONS.has(op.operationId))
      r.headers['Idempotent-Replayed'] = ref('IdempotentReplayed');
  }
}

/** A oneOf whose members all fix the same property to a constant gets its discriminator. */
function addDiscriminators(schemas: Record<string, Doc>) {
  for (const s of Object.values(schemas)) {
    const members = s.oneOf as Doc[] | undefined;
    if (!members?.every((m) => typeof m.$ref === 'string')) continue;
    const resolved = members.map((m) => schemas[m.$ref.split('/').pop()]);
    const prop = Object.keys(resolved[0]?.properties ?? {}).find((k) =>
      resolved.every((r) => r?.properties?.[k]?.const !== undefined && r.required?.includes(k)),
    );
    if (!prop) continue;
    s.discriminator = {
      propertyName: prop,
      mapping: Object.fromEntries(members.map((m, i) => [resolved[i].properties[prop].const, m.$ref])),
    };
  }
}

// --- webhooks ------------------------------------------------------------------------------------

const DELIVERY_HEADERS = [
  ['X-Msgd-Signature', 'sha256=<hex>: HMAC-SHA256 of the exact body bytes, keyed with the endpoint secret'],
  ['X-Msgd-Event-Id', 'the event id (evt_…), the same on every retry'],
  ['webhook-id', 'Standard Webhooks: the event id'],
  ['webhook-timestamp', 'Standard Webhooks: seconds since the epoch; reject old ones to stop replays'],
  ['webhook-signature', 'Standard Webhooks: v1,<base64> signatures over id.timestamp.body, space-separated'],
];

function webhooks(schemas: Record<string, Doc>): Doc {
  const out: Doc = {};
  for (const [name, types, schema] of EVENT_SCHEMAS) {
    schemas[name] = toSchema(schema);
    for (const type of types) {
      out[type] = {
        post: {
          operationId: `on${type.replace(/(^|[._])(\w)/g, (_m, _s, c: string) => c.toUpperCase())}`,
          summary: `The ${type} event`,
          description: `${schema.description ?? ''} Signed; answer 2xx within a few seconds, or it is retried (docs/webhooks-out.md).`,
          security: [{ msgdSignature: [] }],
          parameters: DELIVERY_HEADERS.map(([n, d]) => ({
            name: n,
            in: 'header',
            required: true,
            description: d,
            schema: { type: 'string' },
          })),
          requestBody: { required: true, content: json({ $ref: `#/components/schemas/${name}` }) },
          responses: {
            '200': { description: 'received (any 2xx will do)' },
            '410': { description: 'Gone: msgd disables the endpoint at once' },
          },
        },
      };
    }
  }
  return out;
}

const TAGS: Record<string, string> = {
  'send API': 'The legacy partner send API, paths kept as existing integrations call them (docs/send-api.md)',
  messages: 'Send on any connected channel; read messages and their status history',
  conversations: 'Threads with one contact on one channel, with the 24-hour window where it applies',
  contacts: 'The people you message, found or created by any of their addresses',
  webhooks: 'HTTPS endpoints that receive signed events',
  channels: 'The channels the operator connected for you, and their health',
};

/** The document as generated from the /v1 routes, completed into the whole contract. */
export function completeDocument(doc: Doc): Doc {
  const out: Doc = structuredClone(doc);
  out.paths = { ...legacyPaths(), ...out.paths };
  const named = new Set(['send API', ...((out.tags ?? []) as Doc[]).map((t) => t.name as string)]);
  out.tags = [...named].map((name) => ({ name, description: TAGS[name] ?? name }));
  out.components.headers = HEADERS;
  out.components.securitySchemes.msgdSignature = {
    type: 'apiKey',
    in: 'header',
    name: 'X-Msgd-Signature',
    description:
      'msgd signs each event: sha256=<hex> of HMAC-SHA256 over the exact body bytes with the endpoint secret (whsec_…), ' +
      'and the Standard Webhooks headers. Verify before trusting the body.',
  };
  for (const [path, item] of Object.entries(out.paths as Record<string, Doc>))
    for (const [method, op] of Object.entries(item)) completeResponses(op, method, path);
  addDiscriminators(out.components.schemas);
  out.webhooks = webhooks(out.components.schemas);
  return out;
}
