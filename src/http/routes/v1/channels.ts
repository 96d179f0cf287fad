import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { partnerChannels } from '../../../core/channel-health.js';
import type { HttpDeps } from '../../deps.js';
import { channelOut } from '../../schemas/v1.js';
import { SECURITY, principalOf, requireScope, responses } from './common.js';

export const channelRoutes: FastifyPluginAsync<{ rt: HttpDeps }> = async (app, { rt }) => {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/channels',
    {
      onRequest: requireScope(rt, 'channels:read'),
      schema: {
        tags: ['channels'],
        summary: "The partner's connected channels",
        operationId: 'listChannels',
        description:
          'Scope channels:read. Per channel type, its primary gateway, then (SMS and email) its fallbacks in the order they ' +
          'are tried (position, role): each with its sender address, provider and health from the outcomes of ' +
          'the last 15 minutes of sends (ok, degraded, down, disabled, unknown when nothing was sent). Never credentials. ' +
          'Not paged: the list is short.',
        security: SECURITY,
        response: responses({ 200: z.object({ data: z.array(channelOut), next_cursor: z.null() }) }),
      },
    },
    async (req) => ({ data: await partnerChannels(rt.ctx, principalOf(req).partnerId), next_cursor: null }),
  );
};
