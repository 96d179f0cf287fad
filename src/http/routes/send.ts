import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ChannelType } from '../../core/context.js';
import type { HttpDeps } from '../deps.js';
import { emailBody, smsBody, whatsappBody } from '../schemas/send.js';
import { authHook } from '../auth.js';
import { refuseEncodedBody, sendError } from '../../web/errors.js';
import { acceptJsonBodies } from '../json-body.js';
import { type Limiter, rateLimitHook } from '../rate-limit.js';
import { acceptSend, scheduledAt, validate, type SendSpec } from '../send-flow.js';

// The legacy partner send API. Paths are kept exactly. Checks run in the spec's order:
// 401 token, 403 suspended/scope/channel, 402 exhausted, 400 payload, 402 price, 200; a body
// that cannot be read at all (413, 415) is refused after 401 and the partner's 403s.
// An Idempotency-Key seen before answers with its stored response right after 401/403 (auth).

// The checks themselves and the money path live in ../send-flow.ts, shared with POST /v1/messages.

export const sendRoutes: FastifyPluginAsync<{ rt: HttpDeps; limiter: Limiter }> = async (app, { rt, limiter }) => {
  // Per token, shared with /v1: 429 and the RateLimit-* headers on every answer, as there.
  app.addHook('onRequest', rateLimitHook(rt.auth, limiter, rt.config.rateLimit.perMinute));
  // 401/403 (token, suspended partner, scope) before anything about the body: 413, 415, 400.
  app.addHook('onRequest', authHook(rt.auth, 'messages:send'));
  app.addHook('preParsing', refuseEncodedBody);
  // JSON is decoded and parsed in the handler, after authentication, so a bad token is a 401
  // even when the body is malformed.
  acceptJsonBodies(app);

  const when = (v: string | undefined) => (v === undefined ? undefined : scheduledAt(rt, v));

  function handle(
    req: FastifyRequest,
    reply: FastifyReply,
    fixedChannel: ChannelType | null,
    channelOf: SendSpec['channelOf'],
    plan: SendSpec['plan'],
  ) {
    // Unparseable JSON on the WhatsApp endpoint names no channel (fixedChannel null): then it is
    // 403 when none of its three channels is assigned (as send-sms.php says without an SMS
    // gateway), else the partner-wide funds check.
    return acceptSend(rt, req, reply, {
      fixedChannel,
      channels: fixedChannel ? [fixedChannel] : ['whatsapp', 'messenger', 'instagram'],
      channelOf,
      plan,
      render: (m) => ({ id: m.id, status: m.status }),
    });
  }

  app.post('/api/send-sms.php', (req, reply) =>
    handle(
      req,
      reply,
      'sms',
      () => 'sms',
      (body) => {
        const b = validate(smsBody, body);
        return { to: b.to, content: { kind: 'text', text: b.text }, priceText: b.text, sendAt: when(b.send_at) };
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
          sendAt: when(b.send_at),
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
        const sendAt = when(b.send_at);
        if (b.template) return { to, content: { kind: 'template', template: b.template }, sendAt };
        return { to, content: { kind: 'text', text: b.text! }, sendAt };
      },
    ),
  );
};

export const SEND_PATHS = ['/api/send-sms.php', '/api/send-email.php', '/api/send-whatsapp.php'];

/**
 * 405 with Allow: POST for any other method on the send paths (HEAD comes with GET). Outside
 * sendRoutes, so without its hooks: like a 404, it is about the route, and needs no token.
 */
export const sendMethodRoutes: FastifyPluginAsync = async (app) => {
  for (const url of SEND_PATHS) {
    app.route({
      method: ['GET', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
      url,
      handler: (req, reply) => {
        reply.header('allow', 'POST');
        return sendError(reply, 'method_not_allowed', `${req.method} is not allowed on ${url}: send a POST`);
      },
    });
  }
};
