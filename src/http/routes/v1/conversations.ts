import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { ChannelType } from '../../../core/context.js';
import {
  conversationJson,
  conversationKey,
  conversationMessages,
  getConversation,
  listConversations,
  type ConversationListRow,
  type ConversationSort,
} from '../../../core/conversation-list.js';
import { messageJson } from '../../../core/message-json.js';
import type { HttpDeps } from '../../deps.js';
import { decodeCursor, page } from '../../../web/pagination.js';
import {
  conversationOut,
  conversationQuery,
  conversationWithMessages,
  conversationsQuery,
  idParams,
  pageOf,
} from '../../schemas/v1.js';
import { SECURITY, notFoundError, principalOf, requireScope, responses } from './common.js';

// Cursor orders: 'c' newest first by id, 'u' / '-u' by last activity then id.
const ORDER_TAG: Record<ConversationSort, string> = { '-created_at': 'c', updated_at: 'u', '-updated_at': '-u' };

export const conversationRoutes: FastifyPluginAsync<{ rt: HttpDeps }> = async (app, { rt }) => {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.get(
    '/conversations',
    {
      onRequest: requireScope(rt, 'conversations:read'),
      schema: {
        tags: ['conversations'],
        summary: "The partner's conversations, newest first",
        operationId: 'listConversations',
        description:
          'Scope conversations:read. Filters combine. To sync changes, page with sort=updated_at&updated_since=<last sync>: ' +
          'conversations with new activity move to the end of that order, so none is missed.',
        security: SECURITY,
        querystring: conversationsQuery,
        response: responses({ 200: pageOf(conversationOut) }, [400]),
      },
    },
    async (req) => {
      const q = req.query;
      const tag = ORDER_TAG[q.sort];
      const byUpdated = q.sort !== '-created_at';
      const after = decodeCursor(q.cursor, tag, { time: byUpdated });
      const rows = await listConversations(
        rt.ctx,
        principalOf(req).partnerId,
        {
          channel: q.channel as ChannelType | undefined,
          status: q.status,
          contactId: q.contact,
          updatedSince: q.updated_since,
          updatedBefore: q.updated_before,
        },
        q.sort,
        q.limit + 1,
        after ? { id: after.id, updatedAt: after.t } : null,
      );
      return page(rows, q.limit, conversationJson, (c: ConversationListRow) => {
        const k = conversationKey(c);
        return byUpdated ? { o: tag, id: k.id, t: k.updatedAt } : { o: tag, id: k.id };
      });
    },
  );

  r.get(
    '/conversations/:id',
    {
      onRequest: requireScope(rt, 'conversations:read'),
      schema: {
        tags: ['conversations'],
        summary: 'A conversation with a page of its messages',
        operationId: 'getConversation',
        description:
          'Scope conversations:read. Messages newest first (order=desc, default) or oldest first (order=asc).',
        security: SECURITY,
        params: idParams,
        querystring: conversationQuery,
        response: responses({ 200: conversationWithMessages }, [400, 404]),
      },
    },
    async (req) => {
      const c = await getConversation(rt.ctx, principalOf(req).partnerId, req.params.id);
      if (!c) throw notFoundError('conversation', req.params.id);
      const { limit, order, cursor } = req.query;
      const tag = order === 'asc' ? 'ma' : 'md';
      const after = decodeCursor(cursor, tag);
      const rows = await conversationMessages(rt.ctx, conversationKey(c).id, order, limit + 1, after?.id);
      return {
        ...conversationJson(c),
        messages: page(
          rows,
          limit,
          (m) => messageJson(m),
          (m) => ({ o: tag, id: m.id }),
        ),
      };
    },
  );
};
