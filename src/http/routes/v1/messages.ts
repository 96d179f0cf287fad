import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { ChannelType } from '../../../core/context.js';
import { getMessageRowIn, messageHistoryIn } from '../../../core/messages.js';
import { messageJson } from '../../../core/message-json.js';
import { listMessages } from '../../../core/message-list.js';
import type { MessageStatus } from '../../../core/statuses.js';
import type { HttpDeps } from '../../deps.js';
import { CHANNEL_TYPES } from '../../../core/context.js';
import { acceptSend, quoteSend, scheduledAt, validate, type QuotePlan } from '../../send-flow.js';
import { cancelScheduled } from '../../../core/scheduled.js';
import { decodeCursor, encodeCursor } from '../../../web/pagination.js';
import { messageCreateUnion } from '../../schemas/message-create-union.js';
import {
  idParams,
  messageAccepted,
  messageCreate,
  messageOut,
  messageQuote,
  messagesQuery,
  normalizeTo,
  pageOf,
} from '../../schemas/v1.js';
import { SECURITY, notFoundError, principalOf, requireScope, responses } from './common.js';
import { iso } from '../../../lib/time.js';

// POST /v1/messages is the send API's money path with a /v1 body; the body is validated in
// the handler (same schema as the document shows) so the checks keep the spec's order.
const inHandler = () => (data: unknown) => ({ value: data });

/** A /v1 body as the message it describes (a 400 when invalid), its send_at still as written. */
function draft(body: unknown): QuotePlan {
  const b = validate(messageCreate, body);
  const to = normalizeTo(b.channel, b.to);
  const sendAt = b.send_at ?? undefined;
  if (b.channel === 'email') {
    return {
      channel: b.channel,
      to,
      content: { kind: 'email', subject: b.subject!, text: b.body, ...(b.html !== undefined ? { html: b.html } : {}) },
      sendAt,
    };
  }
  return { channel: b.channel, to, content: { kind: 'text', text: b.body }, priceText: b.body, sendAt };
}

export const messageRoutes: FastifyPluginAsync<{ rt: HttpDeps }> = async (app, { rt }) => {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post(
    '/messages',
    {
      config: { rawBody: true },
      // 401/403 before the body is read (413/415); acceptSend sees the same principal.
      onRequest: requireScope(rt, 'messages:send'),
      validatorCompiler: inHandler,
      schema: {
        tags: ['messages'],
        summary: 'Send a message on any connected channel',
        operationId: 'sendMessage',
        description:
          'Scope messages:send. Priced and debited before it is queued; the same rules as the send API: 401, 403 (scope, ' +
          'suspended, channel not assigned), 402 insufficient_balance when balance and credit are exhausted, 400 invalid ' +
          'payload, 400 outside_customer_service_window (a free-form WhatsApp, Messenger or Instagram message to a ' +
          'customer who has not written to that sender in 24 hours), 402 when this message costs more than is left. ' +
          'Honours Idempotency-Key.',
        security: SECURITY,
        headers: z.object({
          'idempotency-key': z
            .string()
            .max(255)
            .optional()
            .describe('retries with the same key and body get the first answer'),
        }),
        // The document shows one object per channel; the handler validates with messageCreate.
        body: messageCreateUnion,
        response: responses({ 200: messageAccepted }, [400, 402, 422]),
      },
    },
    (req, reply) =>
      acceptSend(rt, req, reply, {
        fixedChannel: null,
        channels: CHANNEL_TYPES,
        channelOf: (body) => {
          const c = (body as { channel?: unknown } | null)?.channel;
          return typeof c === 'string' && (CHANNEL_TYPES as readonly string[]).includes(c) ? (c as ChannelType) : null;
        },
        plan: (body) => {
          const { sendAt, ...p } = draft(body);
          return { ...p, sendAt: sendAt === undefined ? undefined : scheduledAt(rt, sendAt) };
        },
        render: (m) => ({
          id: m.id,
          status: m.status,
          channel: m.channel_type,
          to: m.to,
          created_at: iso(m.created_at),
          send_at: m.send_at === null ? null : iso(m.send_at),
        }),
      }),
  );

  r.post(
    '/messages/quote',
    {
      config: { rawBody: true },
      onRequest: requireScope(rt, 'messages:send'),
      validatorCompiler: inHandler,
      schema: {
        tags: ['messages'],
        summary: 'What a send would cost, and whether it would be accepted, without sending',
        operationId: 'quoteMessage',
        description:
          'Scope messages:send. Takes the body of POST /v1/messages and answers what that send would cost now: the ' +
          'channel, the gateway, for SMS the encoding (GSM-7 or UCS-2) and segments, the unit price and total in the ' +
          "partner's currency, and whether current balance and credit cover it (covered). Nothing is sent or written: " +
          'no message, no debit, no job, no idempotency key. When the send would be refused, sendable is false and ' +
          'refusal holds the status, code, message and details the send would answer (403 channel_not_assigned, 402 ' +
          'insufficient_balance, 400 invalid_request for send_at, 400 recipient_suppressed, 400 ' +
          'outside_customer_service_window), the first in the ' +
          "send's order. A body the send would reject as malformed is a 400 here too. Prices and funds can change " +
          'between a quote and a send; the send is what debits.',
        security: SECURITY,
        body: messageCreateUnion,
        response: responses({ 200: messageQuote }, [400]),
      },
    },
    async (req) => quoteSend(rt, req, draft),
  );

  r.get(
    '/messages',
    {
      onRequest: requireScope(rt, 'messages:read'),
      schema: {
        tags: ['messages'],
        summary: "The partner's messages, newest first",
        operationId: 'listMessages',
        description:
          'Scope messages:read. Filters combine. A failure status (failed, undelivered, bounced, dropped) and status scheduled are each read from ' +
          'an index of their own and answer in full pages. Otherwise a page examines a bounded number of messages: with channel, ' +
          'status or direction filters a page may hold fewer than limit items (even none) and still have a next_cursor, ' +
          'which marks how far back it searched; page on until next_cursor is null. Without history ' +
          '(GET /v1/messages/{id} has it).',
        security: SECURITY,
        querystring: messagesQuery,
        response: responses({ 200: pageOf(messageOut) }, [400]),
      },
    },
    async (req) => {
      const q = req.query;
      const after = decodeCursor(q.cursor, 'm');
      const { rows, next } = await listMessages(
        rt.ctx,
        principalOf(req).partnerId,
        {
          channel: q.channel as ChannelType | undefined,
          status: q.status as MessageStatus | undefined,
          direction: q.direction,
          conversationId: q.conversation,
          recipient: q.recipient,
          createdSince: q.created_since,
          createdBefore: q.created_before,
        },
        q.limit,
        after?.id,
      );
      return { data: rows.map((m) => messageJson(m)), next_cursor: next ? encodeCursor({ o: 'm', id: next }) : null };
    },
  );

  r.get(
    '/messages/:id',
    {
      onRequest: requireScope(rt, 'messages:read'),
      schema: {
        tags: ['messages'],
        summary: 'A message with its status history',
        operationId: 'getMessage',
        description: 'Scope messages:read. Outbound and inbound messages of this partner.',
        security: SECURITY,
        params: idParams,
        response: responses({ 200: messageOut }, [404]),
      },
    },
    async (req) => {
      const m = await getMessageRowIn(rt.ctx.store, req.params.id);
      if (!m || m.partner_id !== principalOf(req).partnerId) throw notFoundError('message', req.params.id);
      return messageJson(m, await messageHistoryIn(rt.ctx.store, m.id, m));
    },
  );

  r.post(
    '/messages/:id/cancel',
    {
      onRequest: requireScope(rt, 'messages:send'),
      schema: {
        tags: ['messages'],
        summary: 'Cancel a scheduled message',
        operationId: 'cancelMessage',
        description:
          'Scope messages:send. A message sent with send_at that is still scheduled becomes canceled: it is never ' +
          'handed to a provider, its price is refunded in the ledger and message.canceled is sent to your webhooks. ' +
          '409 message_not_cancelable (with the current status in details) once it has left scheduled: its time came ' +
          'and dispatch took it, or it was canceled already.',
        security: SECURITY,
        params: idParams,
        response: responses({ 200: messageOut }, [404, 409]),
      },
    },
    async (req) => {
      const principal = principalOf(req);
      const m = await cancelScheduled(rt.ctx, principal.partnerId, req.params.id, `token:${principal.tokenId}`);
      const row = (await getMessageRowIn(rt.ctx.store, m.id))!;
      return messageJson(row, await messageHistoryIn(rt.ctx.store, row.id, row));
    },
  );
};
