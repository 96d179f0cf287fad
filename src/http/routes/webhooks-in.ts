import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingWebhook, IntakeAnswer } from '../../webhooks-in/intake.js';
import type { HttpDeps } from '../deps.js';
import { META_KINDS } from '../../providers/meta-app/settings.js';
import { FailureLog } from '../../lib/failure-log.js';
import { errorHandler, sendError } from '../../web/errors.js';

// Provider webhooks in. One URL takes WhatsApp, Twilio, SendGrid and sandbox events, the
// other Messenger and Instagram (either takes any, so a mixed-up registration still works);
// both answer Meta's GET handshake and take Twilio webhooks set to GET. Bodies are kept as raw
// bytes in this plugin's scope only: every signature is over the body exactly as received.

export const WEBHOOK_PATHS = ['/api/webhook.php', '/api/webhook-messenger.php'] as const;
export const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>';

const EMPTY = Buffer.alloc(0);
const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * A webhook request as the intake reads it. Its public URL is built only when asked for (only
 * Twilio's signature needs it), by a getter on the class rather than one made per request.
 */
class Incoming implements IncomingWebhook {
  readonly method: string;
  readonly path: string;
  readonly headers: FastifyRequest['headers'];
  #url: string | undefined;

  constructor(
    private readonly req: FastifyRequest,
    readonly raw: Buffer,
    readonly gatewayId: string | undefined,
    private readonly rt: HttpDeps,
  ) {
    this.method = req.method;
    this.path = req.url;
    this.headers = req.headers;
  }

  /** The URL as the provider knows it: Twilio signs it, and msgd usually sits behind a proxy. */
  get url(): string {
    return (this.#url ??= publicUrl(this.req, this.rt));
  }
}

function publicUrl(req: FastifyRequest, rt: HttpDeps): string {
  const base = rt.config.server.publicUrl;
  if (base) return base.replace(/\/+$/, '') + req.url;
  // Fastify reads X-Forwarded-Proto/Host only when server.trustProxy is on. A Host that
  // makes no URL cannot match any signature: use our own address, and verification fails.
  const url = `${req.protocol}://${req.host}${req.url}`;
  return URL.canParse(url) ? url : `${rt.selfUrl ?? 'http://127.0.0.1'}${req.url}`;
}

export const webhooksInRoutes: FastifyPluginAsync<{ rt: HttpDeps }> = async (app, { rt }) => {
  const book = rt.gateways;
  const intake = rt.webhookIntake;

  app.removeAllContentTypeParsers();
  const keepRaw = (_req: FastifyRequest, body: Buffer, done: (err: null, body: Buffer) => void) => done(null, body);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, keepRaw);
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, keepRaw);
  app.addContentTypeParser('*', { parseAs: 'buffer' }, keepRaw);

  function incoming(req: FastifyRequest, raw: Buffer = EMPTY): IncomingWebhook {
    const gateway = (req.query as Record<string, unknown> | undefined)?.gateway;
    return new Incoming(req, raw, typeof gateway === 'string' && gateway !== '' ? gateway : undefined, rt);
  }

  // Refusals at info, summed up per provider and reason: a flood of forged requests is a few
  // lines a minute. The stored request (msgctl webhooks log) has the rest.
  const refused = new FailureLog(rt.logger, { what: 'provider webhooks refused' });

  function answer(reply: FastifyReply, a: IntakeAnswer) {
    reply.header('x-msgd-webhook-id', a.id);
    if (a.status !== 200) {
      refused.failure(
        `${a.provider}:${a.code}`,
        a.code,
        { provider: a.provider, webhookId: a.id, status: a.status, reason: a.message },
        'provider webhook refused',
      );
      return sendError(reply, a.code, a.message, [], a.status);
    }
    // Twilio reads the answer to an inbound SMS as TwiML: an empty Response sends no reply.
    if (a.provider === 'twilio') return reply.code(200).type('text/xml').send(EMPTY_TWIML);
    // Ids are [a-z0-9_]: the body needs no serializer.
    return reply.code(200).type('application/json; charset=utf-8').send(`{"received":true,"id":"${a.id}"}`);
  }

  app.setErrorHandler(async (err: FastifyError, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return answer(reply, await intake.tooLarge(incoming(req), rt.config.server.bodyLimitBytes));
    return errorHandler(err, req, reply);
  });

  async function verifyTokenMatches(token: string): Promise<boolean> {
    // On PostgreSQL the book answers with what its last load() read: read what changed since
    // (a gateway added for this subscription), as the POST path does.
    await book.load();
    const want = digest(token);
    let ok = false;
    // Compared with every gateway's token, in constant time, whatever matches first.
    for (const gw of book.ofKinds(META_KINDS)) {
      const t = gw.secrets.verify_token;
      if (t && timingSafeEqual(digest(t), want)) ok = true;
    }
    return ok;
  }

  for (const path of WEBHOOK_PATHS) {
    app.get(path, async (req, reply) => {
      // Twilio set to call its webhook with GET: the params are in the signed URL.
      if (req.headers['x-twilio-signature'] !== undefined) {
        return answer(reply, await intake.receive(incoming(req)));
      }
      const q = (req.query ?? {}) as Record<string, unknown>;
      const token = q['hub.verify_token'];
      const challenge = q['hub.challenge'];
      if (
        q['hub.mode'] === 'subscribe' &&
        typeof token === 'string' &&
        typeof challenge === 'string' &&
        (await verifyTokenMatches(token))
      ) {
        return reply
          .code(200)
          .type('text/plain; charset=utf-8')
          .header('x-content-type-options', 'nosniff')
          .send(challenge);
      }
      return reply.code(403).type('text/plain; charset=utf-8').send('');
    });
    app.post(path, async (req, reply) => {
      const raw = Buffer.isBuffer(req.body) ? req.body : EMPTY;
      return answer(reply, await intake.receive(incoming(req, raw)));
    });
  }
};
