import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { partnerTemplates, templateJson } from '../../../core/whatsapp-templates.js';
import type { HttpDeps } from '../../deps.js';
import { decodeCursor, page } from '../../../web/pagination.js';
import { pageOf, templateOut, templatesQuery } from '../../schemas/v1.js';
import { SECURITY, principalOf, requireScope, responses } from './common.js';

export const templateRoutes: FastifyPluginAsync<{ rt: HttpDeps }> = async (app, { rt }) => {
  app.withTypeProvider<ZodTypeProvider>().get(
    '/templates',
    {
      onRequest: requireScope(rt, 'templates:read'),
      schema: {
        tags: ['templates'],
        summary: 'The WhatsApp templates the partner may send',
        operationId: 'listTemplates',
        description:
          "Scope templates:read. The catalogue of the partner's WhatsApp sender, as msgd last read it from Meta and as " +
          "Meta's status and category webhooks changed it since: name, language, status, category, and the parameters " +
          'a send must give. A template send that does not fit is refused with 400 template_invalid before any cost. ' +
          'Empty when no WhatsApp channel is assigned or its catalogue has never been read.',
        security: SECURITY,
        querystring: templatesQuery,
        response: responses({ 200: pageOf(templateOut) }, [400]),
      },
    },
    async (req) => {
      const q = req.query;
      const after = decodeCursor(q.cursor, 'tpl');
      const rows = await partnerTemplates(
        rt.ctx,
        principalOf(req).partnerId,
        { name: q.name, language: q.language, status: q.status, category: q.category },
        { after: after?.id, limit: q.limit + 1 },
      );
      return page(rows, q.limit, templateJson, (t) => ({ o: 'tpl', id: t.id }));
    },
  );
};
