import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { isStorageError } from '../db/storage.js';
import { ulid } from '../lib/ids.js';
import type { Logger } from 'pino';
import type { HttpDeps } from './deps.js';
import { errorBody, errorHandler, sendError } from '../web/errors.js';
import { LazyRequestLogger, loggedPath } from '../web/logger.js';
import { limiterFor } from './rate-limit.js';
import { healthRoutes } from './routes/health.js';
import { SEND_PATHS, sendMethodRoutes, sendRoutes } from './routes/send.js';
import { v1Routes } from './routes/v1/index.js';
import { webhooksInRoutes } from './routes/webhooks-in.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Build the HTTP app: its hooks, error answers and the partner-facing routes. Never listens:
 * src/server.ts registers the web console into it (after these hooks, so they apply to /ui too)
 * and listens.
 */
export async function buildApp(rt: HttpDeps): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: rt.logger as unknown as FastifyBaseLogger,
    // One line per request is written by the onResponse hook below: at info with log.accessLog,
    // else at debug (5xx at error).
    logController: new LogController({ disableRequestLogging: true }),
    // Each request's child logger is made only if the request logs (src/web/logger.ts).
    childLoggerFactory: (logger, bindings, options) =>
      new LazyRequestLogger(logger as unknown as Logger, bindings, options) as unknown as FastifyBaseLogger,
    bodyLimit: rt.config.server.bodyLimitBytes,
    // A slow client cannot hold a connection: its headers, then its whole request, must arrive
    // in time (a body dripped a byte a second is cut off), checked every second.
    requestTimeout: rt.config.server.requestTimeoutMs,
    keepAliveTimeout: rt.config.server.keepAliveTimeoutMs,
    http: {
      headersTimeout: Math.min(rt.config.server.headersTimeoutMs, rt.config.server.requestTimeoutMs),
      connectionsCheckingInterval: 1_000,
    },
    // /api/send-sms.php/ is /api/send-sms.php: partners' URL builders add slashes.
    routerOptions: { ignoreTrailingSlash: true },
    trustProxy: rt.config.server.trustProxy,
    requestIdHeader: false,
    // Honour a sane caller-supplied id so a partner can correlate; otherwise mint one.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : `req_${ulid()}`;
    },
    // What Node's HTTP parser refuses before Fastify sees a request (an unknown method, a
    // malformed header line or Content-Length, headers over 16 KiB) gets our shape too.
    clientErrorHandler,
    // Requests read while closing are answered by the hook below, in the documented shape.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // Requests the router refuses before any hook runs get our shape and X-Request-Id too.
    frameworkErrors: (err, req, reply) => {
      reply.header('x-request-id', req.id);
      if (err.code === 'FST_ERR_MAX_PARAM_LENGTH')
        return sendError(reply, 'invalid_request', 'a path segment is too long: no id is that long', [], 414);
      if (err.code === 'FST_ERR_BAD_URL')
        return sendError(reply, 'invalid_request', 'the URL is not valid: check its percent-encoding');
      return errorHandler(err, req, reply);
    },
  });

  // Shutting down: a request read now (on a connection that was busy when the shutdown began;
  // idle ones are closed at once) is refused, and its connection closed, so the client retries
  // on another instance or the restarted msgd.
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  // Callback hooks, not async ones: every request runs both, and a promise each is measurable.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    if (closing) {
      reply.header('connection', 'close').header('retry-after', '1');
      return void sendError(reply, 'not_ready', 'msgd is shutting down: retry the request');
    }
    // A NUL (%00) in a path segment or a query value would reach the store as text: PostgreSQL
    // refuses it there (invalid byte sequence), SQLite's text functions end the string at it. No
    // id, filter or token of msgd's holds one, so the URL is refused before any route reads it,
    // as bodies with one are (json-body.ts).
    if (req.url.includes('%00'))
      return void sendError(reply, 'invalid_request', 'the URL has a NUL character (%00), which msgd does not take');
    done();
  });
  // An answer given before the body was read (a 401 from an onRequest hook): the connection
  // closes with it rather than wait for the rest of a body nobody will read.
  app.addHook('onSend', (req, reply, _payload, done) => {
    if (!req.raw.complete) reply.header('connection', 'close');
    done();
  });
  const accessLog = rt.config.log.accessLog;
  app.addHook('onResponse', (req, reply, done) => {
    // The path only, and no invite link's secret: query strings carry secrets (Meta's hub.verify_token).
    // A 503 is a state msgd reports on purpose (not ready, storage full, shutting down), logged
    // where it is decided, once per spell rather than once per request.
    if (reply.statusCode >= 500 && reply.statusCode !== 503)
      req.log.error({ method: req.method, path: loggedPath(req.url), status: reply.statusCode }, 'request failed');
    else if (accessLog)
      req.log.info(
        {
          method: req.method,
          route: req.routeOptions.url ?? null,
          path: loggedPath(req.url),
          status: reply.statusCode,
          ms: Math.round(reply.elapsedTime * 10) / 10,
        },
        'request',
      );
    else if (rt.logger.isLevelEnabled('debug'))
      req.log.debug(
        { method: req.method, path: loggedPath(req.url), status: reply.statusCode, ms: reply.elapsedTime },
        'request',
      );
    done();
  });
  const storage = rt.storage;
  app.setErrorHandler((err: Error, req, reply) => {
    if (isStorageError(err)) storage.noteFailure(err);
    return errorHandler(err, req, reply);
  });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0];
    // Methods the router has no route for (TRACE, PROPFIND, …) on a send path: 405 like the rest.
    if (req.method !== 'POST' && SEND_PATHS.includes(path.replace(/\/+$/, ''))) {
      reply.header('allow', 'POST');
      return sendError(reply, 'method_not_allowed', `${req.method} is not allowed on ${path}: send a POST`);
    }
    return sendError(reply, 'not_found', `no route ${req.method} ${path}`);
  });

  // Routes, one module per surface.
  // One limiter for both partner APIs: a token's requests count together wherever they go (on
  // PostgreSQL, whichever instance they reach).
  const limiter = limiterFor(rt.ctx.store);
  await app.register(healthRoutes, { rt, storage });
  await app.register(sendRoutes, { rt, limiter });
  await app.register(sendMethodRoutes);
  await app.register(webhooksInRoutes, { rt });
  await app.register(v1Routes, { rt, limiter, prefix: '/v1' });
  return app;
}

/**
 * Node's parser errors: answered on the raw socket, which is then closed (its stream is lost).
 * A response still in progress on it (pipelined requests) goes out first: the error answers
 * the request that could not be read, not the one before it.
 */
function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket) {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (!socket.writable) return void socket.destroy();
  const [status, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers_too_large', 'the request headers are too large (16 KiB in all at most)']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'the request did not arrive in time']
        : [400, 'bad_request', 'the request is not valid HTTP/1.1 (method, request line, a header or its framing)'];
  const body = JSON.stringify(errorBody(code, message));
  const answer = () => {
    if (socket.destroyed || !socket.writable) return void socket.destroy();
    // end(), then destroy: a half-closed socket would keep the server from closing.
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: req_${ulid()}\r\nConnection: close\r\n\r\n${body}`,
      () => socket.destroy(),
    );
  };
  const pending = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  // No response open, or the open one is for the request that could not be read (its body
  // broke off or is malformed): this answer is that request's.
  if (!pending || pending.writableFinished || !pending.req?.complete) {
    if (pending?.headersSent && !pending.writableFinished) return void socket.destroy();
    return answer();
  }
  // A request read whole before it (pipelined) is still being answered: that answer goes out
  // first, then this one. Once per socket (the parser reports again on every later chunk),
  // and never longer than the answer's own time limit allows.
  if (waiting.has(socket)) return;
  waiting.add(socket);
  const limit = setTimeout(() => socket.destroy(), PIPELINED_WAIT_MS).unref();
  pending.once('finish', () => {
    clearTimeout(limit);
    answer();
  });
  pending.once('close', () => {
    clearTimeout(limit);
    if (!pending.writableFinished) socket.destroy();
  });
}

/** Sockets whose parser error waits for a pipelined response to go out first. */
const waiting = new WeakSet<Socket>();
/** The longest a parser error waits for the response before it (a send answers in milliseconds). */
const PIPELINED_WAIT_MS = 30_000;
