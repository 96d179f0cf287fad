import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import type { MetricsDeps } from '../deps.js';
import { sendError } from '../../web/errors.js';
import { SEND_PATHS } from '../routes/send.js';
import { registerCircuits } from './circuits.js';
import { registerCollectors, type CollectorSources } from './collectors.js';
import { registerProviderLatency } from './provider-latency.js';
import { registerWorkCounters } from './work-counters.js';

// GET /metrics in Prometheus' text format. Not public: served only on metrics.port (its own
// listener, meant for a private address) and/or on the main port behind metrics.token. The
// request path pays one synchronous hook and a pre-bound histogram child per request.

const SEND_ROUTES = new Set([...SEND_PATHS.map((p) => `POST ${p}`), 'POST /v1/messages']);
/** The methods a label names; any other is counted as `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const TOTAL_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];
const ERROR_CODE = /"code":"([a-z_]{1,64})"/;

export interface Metrics {
  registry: Registry;
  /** The separate listener's URL, when metrics.port is set. */
  url: string | null;
  close(): Promise<void>;
}

/** Hooks on the app and the /metrics route; call before the app listens. */
export function instrumentApp(app: FastifyInstance, rt: MetricsDeps, registry: Registry): void {
  const requests = new Histogram({
    name: 'msgd_http_request_duration_seconds',
    help: 'HTTP requests by method (GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, other), route (pattern) and status, with their duration',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const sends = new Counter({
    name: 'msgd_sends_total',
    help: 'Send requests (legacy send API and POST /v1/messages) accepted, and refused by error code (accepted ones have no code label)',
    labelNames: ['result', 'code'],
    registers: [registry],
  });
  const byRequest = new Map<string, Histogram.Internal<'method' | 'route' | 'status'>>();
  const bySend = new Map<string, Counter.Internal>();
  // An accepted send has no error code: its series has no code label (code="" is no code).
  const accepted = sends.labels({ result: 'accepted' });

  app.addHook('onSend', (req, reply, payload, done) => {
    if (SEND_ROUTES.has(`${req.method} ${req.routeOptions.url}`)) {
      if (reply.statusCode < 300) accepted.inc();
      else {
        const code = (typeof payload === 'string' && ERROR_CODE.exec(payload)?.[1]) || `http_${reply.statusCode}`;
        let c = bySend.get(code);
        if (!c) bySend.set(code, (c = sends.labels('refused', code)));
        c.inc();
      }
    }
    done(null, payload);
  });
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url ?? 'unmatched';
    // Node accepts some 30 methods (PROPFIND, MKCOL, …); any caller can send them.
    const method = METHODS.has(req.method) ? req.method : 'other';
    const key = `${method} ${route} ${reply.statusCode}`;
    let h = byRequest.get(key);
    if (!h) byRequest.set(key, (h = requests.labels(method, route, String(reply.statusCode))));
    h.observe(reply.elapsedTime / 1000);
    done();
  });

  const token = rt.config.metrics.token;
  if (token !== null) {
    const want = digest(token);
    app.get('/metrics', async (req, reply) => {
      if (!bearerMatches(req.headers.authorization, want)) {
        reply.header('www-authenticate', 'Bearer realm="metrics"');
        return sendError(reply, 'unauthorized', 'send Authorization: Bearer <metrics.token>');
      }
      return serve(reply, registry);
    });
  }
}

export function createMetricsRegistry(src: CollectorSources): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 10 });
  // Gauges named like counters, which promtool refuses; nodejs_active_{handles,requests,resources}
  // by type stay, and their sum is the same figure.
  for (const name of TOTAL_GAUGES) registry.removeSingleMetric(name);
  registerCollectors(registry, src);
  registerWorkCounters(registry, src.rt.counters);
  registerProviderLatency(registry, src.rt.counters);
  registerCircuits(registry, src.rt.breakers);
  return registry;
}

/** The separate listener on metrics.host:metrics.port, if configured. */
export async function startMetricsListener(rt: MetricsDeps, registry: Registry): Promise<Metrics> {
  const { host, port, token } = rt.config.metrics;
  if (port === null) return { registry, url: null, close: async () => {} };
  const want = token === null ? null : digest(token);
  const server: HttpServer = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    const answer = (status: number, type: string, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), ...headers });
      res.end(body);
    };
    const error = (status: number, code: string, message: string, headers?: Record<string, string>) =>
      answer(
        status,
        'application/json; charset=utf-8',
        JSON.stringify({ error: { code, message, details: [] } }),
        headers,
      );
    if (path !== '/metrics')
      return error(404, 'not_found', `no route ${req.method} ${path}: this listener serves /metrics`);
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return error(405, 'method_not_allowed', `${req.method} is not allowed on /metrics`, { allow: 'GET' });
    if (want && !bearerMatches(req.headers.authorization, want))
      return error(401, 'unauthorized', 'send Authorization: Bearer <metrics.token>', {
        'www-authenticate': 'Bearer realm="metrics"',
      });
    registry.metrics().then(
      (text) => answer(200, registry.contentType, text),
      () => error(500, 'internal_error', 'the metrics could not be collected'),
    );
  });
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const bound = typeof addr === 'object' && addr ? addr.port : port;
  return {
    registry,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${bound}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function serve(reply: FastifyReply, registry: Registry) {
  const text = await registry.metrics();
  return reply.type(registry.contentType).send(text);
}

const digest = (s: string) => createHash('sha256').update(s).digest();

function bearerMatches(header: string | undefined, want: Buffer): boolean {
  const m = typeof header === 'string' ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  return m !== null && timingSafeEqual(digest(m[1]), want);
}
