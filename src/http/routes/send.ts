import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { AppError } from '../../lib/errors.js';
import type { ChannelType } from '../../core/context.js';
import type { MessageContent } from '../../core/message-content.js';
import { accept, canonicalHash, findIdempotent, fundsCheck, preflight } from '../../jobs/dispatch-accept.js';
import type { Runtime } from '../../runtime.js';
import { authenticate } from '../auth.js';
import { statusFor } from '../errors.js';
import { emailBody, smsBody, templateFrom, whatsappBody, zodDetails } from '../schemas/send.js';

// The legacy partner send API. Paths are kept exactly. Checks run in the spec's order:
// 401 token, 403 suspended/scope/channel, 402 exhausted, 400 payload, 402 price, 200.
// An Idempotency-Key seen before answers with its stored response right after 401/403 (auth).

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
    throw new AppError('invalid_request', 'Idempotency-Key must be 1-255 visible ASCII characters', [
      { field: 'Idempotency-Key', message: '1-255 visible ASCII characters' },
    ]);
  }
  return { key, hash: canonicalHash(req.method, req.routeOptions.url ?? req.url, body) };
}

/** Run fn now, but hold a 400 it throws until the checks the spec orders first have run. */
function deferred<T>(fn: () => T): { value?: T; error?: unknown } {
  try {
    return { value: fn() };
  } catch (error) {
    if (error instanceof AppError && statusFor(error.code) === 400) return { error };
    throw error;
  }
}

export const sendRoutes: FastifyPluginAsync<{ rt: Runtime }> = async (app, { rt }) => {
  // Parse JSON in the handler, after authentication, so a bad token is a 401 even when the
  // body is malformed. Only JSON is taken: without removing the defaults, text/plain would
  // reach the handler as a string and be parsed as JSON; every other type is a 415.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => done(null, body));

  const ttlMs = rt.config.idempotency.ttlHours * 3_600_000;

  async function handle(
    req: FastifyRequest,
    reply: FastifyReply,
    fixedChannel: ChannelType | null,
    channelOf: (body: unknown) => ChannelType,
    plan: (body: unknown, channel: ChannelType) => Plan,
  ) {
    // 401, and 403 for a suspended partner or a missing scope.
    const principal = authenticate(rt.auth, req, 'messages:send');
    // A malformed body or Idempotency-Key is a 400: it waits for the 403/402 checks below.
    const parsed = deferred(() => parseJsonBody(req.body));
    const idem = parsed.error ? {} : deferred(() => idempotencyOf(req, parsed.value));
    const idempotency = idem.value;
    // A retry of an accepted request gets its first answer even if the money has run out
    // since: the first request was the one that paid.
    if (idempotency) {
      const hit = findIdempotent(rt.ctx, principal.partnerId, idempotency, ttlMs);
      if (hit) return reply.header('idempotent-replayed', 'true').code(hit.status).send(hit.body);
    }
    // 403 channel not assigned / gateway disabled, 402 funds exhausted. Unparseable JSON on
    // the WhatsApp endpoint names no channel: only the partner-wide funds check applies then.
    const channel = parsed.error ? fixedChannel : channelOf(parsed.value);
    const pre = channel ? preflight(rt.ctx, principal, channel) : (fundsCheck(rt.ctx, principal), undefined);
    if (parsed.error) throw parsed.error;
    if (idem.error) throw idem.error;
    const p = plan(parsed.value, channel!);
    const result = await accept(rt.acceptDeps, {
      principal,
      preflight: pre!,
      to: p.to,
      content: p.content,
      priceText: p.priceText,
      idempotency,
      idempotencyTtlMs: ttlMs,
      respond: (m) => ({ status: 200, body: { id: m.id, status: m.status } }),
    });
    if (result.kind === 'replay') reply.header('idempotent-replayed', 'true');
    return reply.code(result.status).send(result.body);
  }

  app.post('/api/send-sms.php', (req, reply) =>
    handle(
      req,
      reply,
      'sms',
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
      'email',
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
      null,
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
