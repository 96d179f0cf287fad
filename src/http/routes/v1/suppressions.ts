import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  createSuppression,
  getSuppression,
  listSuppressions,
  normalizeAddress,
  removeSuppression,
  suppressionJson,
} from '../../../core/suppressions.js';
import type { HttpDeps } from '../../deps.js';
import { decodeCursor, page } from '../../../web/pagination.js';
import {
  suppressionCreate,
  suppressionDeleteQuery,
  suppressionOut,
  suppressionQuery,
} from '../../schemas/suppressions.js';
import { idParams, pageOf } from '../../schemas/v1.js';
import { SECURITY, notFoundError, principalOf, requireScope, responses } from './common.js';

// The partner's suppression list (docs/suppressions.md): who must not be sent to, why and since
// when. Sends to them are refused with 400 recipient_suppressed before any cost.

export const suppressionRoutes: FastifyPluginAsync<{ rt: HttpDeps }> = async (app, { rt }) => {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const read = requireScope(rt, 'suppressions:read');
  const write = requireScope(rt, 'suppressions:write');

  r.get(
    '/suppressions',
    {
      onRequest: read,
      schema: {
        tags: ['suppressions'],
        summary: 'The partner’s suppressed recipients, newest first',
        operationId: 'listSuppressions',
        description:
          'Scope suppressions:read. Filters: channel, reason, address (the exact address; normalized for the channel when ' +
          'channel is given, e.g. an email address in lower case).',
        security: SECURITY,
        querystring: suppressionQuery,
        response: responses({ 200: pageOf(suppressionOut) }, [400]),
      },
    },
    async (req) => {
      const q = req.query;
      const after = decodeCursor(q.cursor, 'sup');
      // A phone number's + left unencoded in the query string arrives as a space.
      const raw =
        q.address !== undefined && q.channel !== 'messenger' && q.channel !== 'instagram'
          ? q.address.replace(/^ (?=[1-9]\d*$)/, '+')
          : q.address;
      const address = raw !== undefined && q.channel ? (normalizeAddress(q.channel, raw) ?? raw) : raw;
      const rows = await listSuppressions(rt.ctx, principalOf(req).partnerId, {
        channel: q.channel,
        reason: q.reason,
        address,
        before: after?.id,
        limit: q.limit + 1,
      });
      return page(rows, q.limit, suppressionJson, (s) => ({ o: 'sup', id: s.id }));
    },
  );

  r.get(
    '/suppressions/:id',
    {
      onRequest: read,
      schema: {
        tags: ['suppressions'],
        summary: 'One suppression',
        operationId: 'getSuppression',
        security: SECURITY,
        params: idParams,
        response: responses({ 200: suppressionOut }, [404]),
      },
    },
    async (req) => {
      const s = await getSuppression(rt.ctx, principalOf(req).partnerId, req.params.id);
      if (!s) throw notFoundError('suppression', req.params.id);
      return suppressionJson(s);
    },
  );

  r.post(
    '/suppressions',
    {
      onRequest: write,
      schema: {
        tags: ['suppressions'],
        summary: 'Suppress a recipient',
        operationId: 'createSuppression',
        description:
          'Scope suppressions:write. Sends to the address on that channel (from every sender, or from the one given) are ' +
          'refused with 400 recipient_suppressed. The same address, reason and sender again answers 200 with the entry as it was.',
        security: SECURITY,
        body: suppressionCreate,
        response: responses({ 200: suppressionOut, 201: suppressionOut }, [400]),
      },
    },
    async (req, reply) => {
      const p = principalOf(req);
      const { row, created } = await createSuppression(
        rt.ctx,
        p.partnerId,
        {
          channel: req.body.channel,
          address: req.body.address,
          reason: req.body.reason,
          sender: req.body.sender ?? null,
          detail: req.body.detail ?? null,
        },
        `token:${p.tokenId}`,
      );
      return reply.code(created ? 201 : 200).send(suppressionJson(row));
    },
  );

  r.delete(
    '/suppressions/:id',
    {
      onRequest: write,
      schema: {
        tags: ['suppressions'],
        summary: 'Remove a suppression',
        operationId: 'deleteSuppression',
        description:
          'Scope suppressions:write. An opt-out the customer made by keyword (reason opt_out_keyword) is removed only with ' +
          '?consent_confirmed=true, your statement that you hold their renewed consent; it is recorded with your token in the ' +
          'audit log and in the suppression.deleted event. Without it: 400 consent_required.',
        security: SECURITY,
        params: idParams,
        querystring: suppressionDeleteQuery,
        response: responses({ 204: z.null().describe('removed') }, [400, 404]),
      },
    },
    async (req, reply) => {
      const p = principalOf(req);
      await removeSuppression(rt.ctx, p.partnerId, req.params.id, {
        actor: `token:${p.tokenId}`,
        consentConfirmed: req.query.consent_confirmed === 'true',
      });
      return reply.code(204).send();
    },
  );
};
