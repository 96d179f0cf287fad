import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { contactJson } from '../../../core/contacts.js';
import { getContact, listContacts, upsertContact } from '../../../core/contact-book.js';
import type { HttpDeps } from '../../deps.js';
import { decodeCursor, page } from '../../../web/pagination.js';
import { contactOut, contactUpsert, contactsQuery, idParams, pageOf } from '../../schemas/v1.js';
import { SECURITY, notFoundError, principalOf, requireScope, responses } from './common.js';

export const contactRoutes: FastifyPluginAsync<{ rt: HttpDeps }> = async (app, { rt }) => {
  const r = app.withTypeProvider<ZodTypeProvider>();

  r.post(
    '/contacts',
    {
      onRequest: requireScope(rt, 'contacts:write'),
      schema: {
        tags: ['contacts'],
        summary: 'Create or update a contact',
        operationId: 'upsertContact',
        description:
          'Scope contacts:write. The contact is found by any address given (phone, email, messenger_psid, instagram_igsid): ' +
          'if one exists it is updated (200), otherwise created (201). Addresses of two different contacts are a 409. ' +
          'Messages to and from these addresses join this contact.',
        security: SECURITY,
        body: contactUpsert,
        response: responses({ 200: contactOut, 201: contactOut }, [400, 409]),
      },
    },
    async (req, reply) => {
      const b = req.body;
      const { contact, created } = await upsertContact(rt.ctx, principalOf(req).partnerId, {
        name: b.name,
        phone: b.phone,
        email: b.email,
        psid: b.messenger_psid,
        igsid: b.instagram_igsid,
        attributes: b.attributes,
      });
      return reply.code(created ? 201 : 200).send(contactJson(contact));
    },
  );

  r.get(
    '/contacts',
    {
      onRequest: requireScope(rt, 'contacts:read'),
      schema: {
        tags: ['contacts'],
        summary: "The partner's contacts, newest first",
        operationId: 'listContacts',
        description:
          'Scope contacts:read (contacts:write includes it). Search with q, or look up one address with phone or email.',
        security: SECURITY,
        querystring: contactsQuery,
        response: responses({ 200: pageOf(contactOut) }, [400]),
      },
    },
    async (req) => {
      const q = req.query;
      const after = decodeCursor(q.cursor, 'ct');
      const rows = await listContacts(
        rt.ctx,
        principalOf(req).partnerId,
        { q: q.q, phone: q.phone, email: q.email?.trim() },
        q.limit + 1,
        after?.id,
      );
      return page(rows, q.limit, contactJson, (c) => ({ o: 'ct', id: c.id }));
    },
  );

  r.get(
    '/contacts/:id',
    {
      onRequest: requireScope(rt, 'contacts:read'),
      schema: {
        tags: ['contacts'],
        summary: 'One contact',
        operationId: 'getContact',
        description: 'Scope contacts:read.',
        security: SECURITY,
        params: idParams,
        response: responses({ 200: contactOut }, [404]),
      },
    },
    async (req) => {
      const c = await getContact(rt.ctx, principalOf(req).partnerId, req.params.id);
      if (!c) throw notFoundError('contact', req.params.id);
      return contactJson(c);
    },
  );
};
