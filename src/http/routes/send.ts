import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { AppError } from '../../lib/errors.js';
import type { ChannelType } from '../../core/context.js';
import type { MessageContent } from '../../core/message-content.js';
import { accept, canonicalHash, preflight } from '../../jobs/dispatch-accept.js';
import type { Runtime } from '../../runtime.js';
import { authenticate } from '../auth.js';
import { emailBody, smsBody, templateFrom, whatsappBody, zodDetails } from '../schemas/send.js';

// The legacy partner send API. Paths are kept exactly. Checks run in the spec's order:
// 401 token, 403 suspended/scope/channel, 402 exhausted, 400 payload, 402 price, 200.

interface Plan {
  to: string;
  content: MessageContent;
  priceText?: string;
}

export function parseJsonBody(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  if (raw.trim() === '') throw new AppError('invalid_json', 'the body is empty; send a JSON object');
  try {
    return JSON.parse(raw);
  } catch {
    throw new AppError('invalid_json', 'the body is not valid JSON');
  }
}

export function validate<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('invalid_request', 'the body must be a JSON object');
  }
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new AppError('invalid_request', 'the request is invalid', zodDetails(parsed.error));
  return parsed.data;
}

export function idempotencyOf(req: FastifyRequest, body: unknown) {
  const key = req.headers['idempotency-key'];
  if (key === undefined) return undefined;
  if (typeof key !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw new AppError('invalid_request', 'Idempotency-Key must be 1-255 visible ASCII characters');
  }
  return { key, hash: canonicalHash(req.method, req.routeOptions.url ?? req.url, body) };
}

export const sendRoutes: FastifyPluginAsync<{ rt: Runtime }> = async (app, { rt }) => {
  // Parse JSON in the handler, after authentication, so a bad token is a 401 even when the
  // body is malformed. Any other content type is a 415.
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));

  async function handle(
    req: FastifyRequest,
    reply: FastifyReply,
    channelOf: (body: unknown) => ChannelType,
    plan: (body: unknown, channel: ChannelType) => Plan,
  ) {
    const principal = authenticate(rt.auth, req, 'messages:send');
    const body = parseJsonBody(req.body);
    const channel = channelOf(body);
    const pre = preflight(rt.ctx, principal, channel);
    const idempotency = idempotencyOf(req, body);
    const p = plan(body, channel);
    const result = await accept(rt.acceptDeps, {
      principal,
      preflight: pre,
      to: p.to,
      content: p.content,
      priceText: p.priceText,
      idempotency,
      idempotencyTtlMs: rt.config.idempotency.ttlHours * 3_600_000,
      respond: (m) => ({ status: 200, body: { id: m.id, status: m.status } }),
    });
    if (result.kind === 'replay') reply.header('idempotent-replayed', 'true');
    return reply.code(result.status).send(result.body);
  }

  app.post('/api/send-sms.php', (req, reply) =>
    handle(
      req,
      reply,
      () => 'sms',
      (body) => {
        const b = validate(smsBody, body);
        return { to: b.to, content: { kind: 'text', text: b.text }, priceText: b.text };
      },
    ),
  );

  app.post('/api/send-email.php', (req, reply) =>
    handle(
      req,
      reply,
      () => 'email',
      (body) => {
        const b = validate(emailBody, body);
        return {
          to: b.to,
          content: {
            kind: 'email',
            subject: b.subject,
            html: b.html,
            ...(b.text !== undefined ? { text: b.text } : {}),
            ...(b.from_name !== undefined ? { fromName: b.from_name } : {}),
            ...(b.reply_to !== undefined ? { replyTo: b.reply_to } : {}),
          },
        };
      },
    ),
  );

  app.post('/api/send-whatsapp.php', (req, reply) =>
    handle(
      req,
      reply,
      (body) => {
        const c = (body as any)?.channel;
        return c === 'messenger' || c === 'instagram' ? c : 'whatsapp';
      },
      (body, channel) => {
        const b = validate(whatsappBody, body);
        const to = channel === 'whatsapp' ? smsBody.shape.to.parse(b.to) : b.to;
        if (b.type === 'template') return { to, content: { kind: 'template', template: templateFrom(b) } };
        return { to, content: { kind: 'text', text: b.text! } };
      },
    ),
  );
};
