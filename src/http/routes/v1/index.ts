import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import type { HttpDeps } from '../../deps.js';
import { refuseEncodedBody, sendError } from '../../../web/errors.js';
import { type Limiter, rateLimitHook } from '../../rate-limit.js';
import { houseError } from '../../schemas/house-errors.js';
import { acceptJsonBodies, decodeBody, parseJsonBody } from '../../json-body.js';
import { channelRoutes } from './channels.js';
import { contactRoutes } from './contacts.js';
import { conversationRoutes } from './conversations.js';
import { messageRoutes } from './messages.js';
import { openapiRoutes } from './openapi.js';
import { templateRoutes } from './templates.js';
import { suppressionRoutes } from './suppressions.js';
import { webhookRoutes } from './webhooks.js';

// The resource API, registered under /v1. Order inside every request: rate limit (per token,
// headers on every response) → route's scope check (401/403) → JSON body → zod validation
// (400) → handler. Responses are plain JSON.stringify: the zod response schemas document the
// API (and tests hold real responses to them) but are not re-validated per request.

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The handler parses the JSON body itself (POST /v1/messages keeps the send API's order). */
    rawBody?: boolean;
  }
}

export const v1Routes: FastifyPluginAsync<{ rt: HttpDeps; limiter: Limiter }> = async (app, { rt, limiter }) => {
  // fastify-type-provider-zod's compiler, but issues worded in the house style (houseError).
  app.setValidatorCompiler<z.ZodType>(({ schema }) => (data) => {
    const r = schema.safeParse(data, { error: houseError });
    if (r.success) return { value: r.data };
    return {
      error: r.error.issues.map((i) => ({
        path: i.path,
        message: i.message,
        instancePath: `/${i.path.join('/')}`,
        schemaPath: '',
        keyword: i.code,
        params: {},
      })),
    };
  });
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  // JSON arrives as bytes and is parsed after the scope check, so a bad token is a 401 even
  // with a malformed body; an empty body is no body (POST …/rotate-secret, …/test).
  acceptJsonBodies(app);
  app.addHook('preValidation', async (req: FastifyRequest) => {
    if (!Buffer.isBuffer(req.body) || req.routeOptions.config.rawBody) return;
    const text = decodeBody(req.body);
    req.body = text.trim() === '' ? undefined : parseJsonBody(text);
  });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'msgd resource API',
        version: rt.version,
        description:
          'Send on any connected channel, read conversations, keep contacts and the suppression list, register signed webhook endpoints. ' +
          'Errors: {"error": {"code", "message", "details"}}. Pages: {"data": [...], "next_cursor"} with ?limit (1-200, default 50) ' +
          'and ?cursor. Every response carries X-Request-Id and RateLimit-Limit / RateLimit-Remaining / RateLimit-Reset.',
      },
      servers: [{ url: rt.config.server.publicUrl ?? '/' }],
      components: {
        securitySchemes: {
          bearerAuth: { type: 'http', scheme: 'bearer', description: 'a msgd API token (msgd_live_…)' },
        },
      },
      tags: ['messages', 'conversations', 'contacts', 'webhooks', 'channels', 'templates', 'suppressions'].map(
        (name) => ({ name }),
      ),
    },
    transform: jsonSchemaTransform,
    transformObject: jsonSchemaTransformObject,
  });

  app.addHook('onRequest', rateLimitHook(rt.auth, limiter, rt.config.rateLimit.perMinute));
  app.addHook('preParsing', refuseEncodedBody);
  // A path that exists with another method is a 405 naming the methods it has (RFC 9110), as on
  // the send API; only a path that does not exist at all is a 404.
  const allowed = methodsByPath(app);
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0];
    const allow = allowed(path);
    if (allow.length > 0) {
      reply.header('allow', allow.join(', '));
      return sendError(
        reply,
        'method_not_allowed',
        `${req.method} is not allowed on ${path}: use ${allow.join(' or ')}`,
      );
    }
    return sendError(reply, 'not_found', `no route ${req.method} ${path}`);
  });

  await app.register(messageRoutes, { rt });
  await app.register(conversationRoutes, { rt });
  await app.register(contactRoutes, { rt });
  await app.register(webhookRoutes, { rt });
  await app.register(channelRoutes, { rt });
  await app.register(templateRoutes, { rt });
  await app.register(suppressionRoutes, { rt });
  await app.register(openapiRoutes, { rt, root: app });
};

const METHOD_ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** The methods each route path answers, collected as routes register; `:param` matches one segment. */
function methodsByPath(app: FastifyInstance): (path: string) => string[] {
  const routes = new Map<string, { re: RegExp; methods: Set<string> }>();
  app.addHook('onRoute', (r) => {
    const url = r.url.replace(/\/+$/, '');
    let route = routes.get(url);
    if (!route) {
      const source = url
        .split('/')
        .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      routes.set(url, (route = { re: new RegExp(`^${source}/*$`), methods: new Set() }));
    }
    for (const m of [r.method].flat()) route.methods.add(m);
  });
  return (path) => {
    const methods = new Set<string>();
    for (const r of routes.values()) if (r.re.test(path)) for (const m of r.methods) methods.add(m);
    return METHOD_ORDER.filter((m) => methods.has(m));
  };
}
