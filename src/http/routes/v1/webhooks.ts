import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  createEndpoint,
  deleteEndpoint,
  endpointJson,
  getEndpoint,
  listEndpoints,
  rotateSecret,
} from '../../../core/endpoints.js';
import type { EventType } from '../../../core/events.js';
import { AppError } from '../../../lib/errors.js';
import type { HttpDeps } from '../../deps.js';
import { sendTestEvent } from '../../../webhooks-out/replay.js';
import { checkEndpointUrl } from '../../../webhooks-out/ssrf.js';
import { decodeCursor, page } from '../../../web/pagination.js';
import {
  idParams,
  pageOf,
  pageQuery,
  webhookCreate,
  webhookOut,
  webhookTestOut,
  webhookWithSecret,
} from '../../schemas/v1.js';
import { SECURITY, notFoundError, principalOf, requireScope, responses } from './common.js';

// Endpoints a partner registers for events. The secret appears in two responses only:
// create and rotate-secret. Everything else shows the endpoint without it.

export const webhookRoutes: FastifyPluginAsync<{ rt: HttpDeps }> = async (app, { rt }) => {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const scope = requireScope(rt, 'webhooks:manage');
  const cfg = rt.config.webhooksOut;

  r.post(
    '/webhooks',
    {
      onRequest: scope,
      schema: {
        tags: ['webhooks'],
        summary: 'Register an endpoint',
        operationId: 'createWebhookEndpoint',
        description:
          'Scope webhooks:manage. HTTPS only; a URL whose host resolves to a loopback, private, link-local, CGNAT or metadata ' +
          'address is refused (url_not_allowed). The response holds the signing secret: it is never shown again.',
        security: SECURITY,
        body: webhookCreate,
        response: responses({ 201: webhookWithSecret }, [400, 409]),
      },
    },
    async (req, reply) => {
      const url = await checkEndpointUrl(req.body.url, cfg.allowPrivateTargets);
      const { endpoint, secret } = await createEndpoint(rt.ctx, principalOf(req).partnerId, {
        url: url.href,
        events: (req.body.events ?? null) as EventType[] | null,
        description: req.body.description ?? null,
      });
      return reply.code(201).send({ ...endpointJson(endpoint, rt.ctx.now()), secret });
    },
  );

  r.get(
    '/webhooks',
    {
      onRequest: scope,
      schema: {
        tags: ['webhooks'],
        summary: 'The partner’s endpoints (without secrets)',
        operationId: 'listWebhookEndpoints',
        description: 'Scope webhooks:manage. A disabled endpoint says why in disabled_reason.',
        security: SECURITY,
        querystring: pageQuery,
        response: responses({ 200: pageOf(webhookOut) }, [400]),
      },
    },
    async (req) => {
      const after = decodeCursor(req.query.cursor, 'whe');
      const rows = await listEndpoints(rt.ctx, principalOf(req).partnerId, {
        limit: req.query.limit + 1,
        before: after?.id,
      });
      const now = rt.ctx.now();
      return page(
        rows,
        req.query.limit,
        (e) => endpointJson(e, now),
        (e) => ({ o: 'whe', id: e.id }),
      );
    },
  );

  r.get(
    '/webhooks/:id',
    {
      onRequest: scope,
      schema: {
        tags: ['webhooks'],
        summary: 'One endpoint (without its secret)',
        operationId: 'getWebhookEndpoint',
        security: SECURITY,
        params: idParams,
        response: responses({ 200: webhookOut }, [404]),
      },
    },
    async (req) => {
      const e = await getEndpoint(rt.ctx, principalOf(req).partnerId, req.params.id);
      if (!e) throw notFoundError('webhook endpoint', req.params.id);
      return endpointJson(e, rt.ctx.now());
    },
  );

  r.delete(
    '/webhooks/:id',
    {
      onRequest: scope,
      schema: {
        tags: ['webhooks'],
        summary: 'Delete an endpoint',
        operationId: 'deleteWebhookEndpoint',
        description: 'Scope webhooks:manage. Deliveries still waiting for it are cancelled.',
        security: SECURITY,
        params: idParams,
        response: responses({ 204: z.null().describe('deleted') }, [404]),
      },
    },
    async (req, reply) => {
      if (!(await deleteEndpoint(rt.ctx, principalOf(req).partnerId, req.params.id)))
        throw notFoundError('webhook endpoint', req.params.id);
      return reply.code(204).send();
    },
  );

  r.post(
    '/webhooks/:id/rotate-secret',
    {
      onRequest: scope,
      schema: {
        tags: ['webhooks'],
        summary: 'Issue a new signing secret',
        operationId: 'rotateWebhookSecret',
        description:
          `Scope webhooks:manage. The new secret signs from now on; the previous one keeps signing beside it for ` +
          `${cfg.rotationGraceHours} h (two signatures in webhook-signature, X-Msgd-Signature-Previous), then stops.`,
        security: SECURITY,
        params: idParams,
        response: responses({ 200: webhookWithSecret }, [404]),
      },
    },
    async (req) => {
      const partnerId = principalOf(req).partnerId;
      if (!(await getEndpoint(rt.ctx, partnerId, req.params.id)))
        throw notFoundError('webhook endpoint', req.params.id);
      const { endpoint, secret } = await rotateSecret(
        rt.ctx,
        partnerId,
        req.params.id,
        cfg.rotationGraceHours * 3_600_000,
      );
      return { ...endpointJson(endpoint, rt.ctx.now()), secret };
    },
  );

  r.post(
    '/webhooks/:id/test',
    {
      onRequest: scope,
      schema: {
        tags: ['webhooks'],
        summary: 'Send a webhook.test event to this endpoint',
        operationId: 'testWebhookEndpoint',
        description:
          'Scope webhooks:manage. Signed and retried like any event, sent to this endpoint only. 409 while it is disabled.',
        security: SECURITY,
        params: idParams,
        response: responses({ 202: webhookTestOut }, [404, 409]),
      },
    },
    async (req, reply) => {
      const e = await getEndpoint(rt.ctx, principalOf(req).partnerId, req.params.id);
      if (!e) throw notFoundError('webhook endpoint', req.params.id);
      if (e.status !== 'enabled') {
        throw new AppError(
          'conflict',
          `this endpoint is disabled (${e.disabled_reason ?? 'no reason recorded'}); the operator can enable it again`,
        );
      }
      const { eventId, deliveryId } = await sendTestEvent(rt.ctx, rt.queue, e);
      return reply.code(202).send({ event_id: eventId, delivery_id: deliveryId });
    },
  );
};
