import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { ulid } from '../lib/ids.js';
import type { Runtime } from '../runtime.js';
import { errorHandler, sendError } from './errors.js';
import { healthRoutes } from './routes/health.js';
import { sendRoutes } from './routes/send.js';
import { v1Routes } from './routes/v1/index.js';
import { webhooksInRoutes } from './routes/webhooks-in.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Build the HTTP app over a runtime. Never listens: src/server.ts does, tests use inject(). */
export async function buildApp(rt: Runtime): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: rt.logger as unknown as FastifyBaseLogger,
    // One line per request is written by the onResponse hook below, at debug (5xx at error).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: rt.config.server.bodyLimitBytes,
    trustProxy: rt.config.server.trustProxy,
    requestIdHeader: false,
    // Honour a sane caller-supplied id so a partner can correlate; otherwise mint one.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : `req_${ulid()}`;
    },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
  });

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });
  app.addHook('onResponse', async (req, reply) => {
    // The path only: query strings carry secrets (Meta's hub.verify_token).
    const path = req.url.split('?')[0];
    if (reply.statusCode >= 500) req.log.error({ method: req.method, path, status: reply.statusCode }, 'request failed');
    else req.log.debug({ method: req.method, path, status: reply.statusCode, ms: reply.elapsedTime }, 'request');
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler((req, reply) => sendError(reply, 'not_found', `no route ${req.method} ${req.url.split('?')[0]}`));

  // Routes, one module per surface.
  await app.register(healthRoutes, { rt });
  await app.register(sendRoutes, { rt });
  await app.register(webhooksInRoutes, { rt });
  // [webhooks-in routes]
  // [v1 routes]
  await app.register(v1Routes, { rt, prefix: '/v1' });
  return app;
}
