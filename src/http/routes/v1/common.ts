import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { AuthPrincipal, Scope } from '../../../core/tokens.js';
import { AppError } from '../../../lib/errors.js';
import type { HttpDeps } from '../../deps.js';
import { authenticate } from '../../auth.js';
import { errorOut } from '../../schemas/v1.js';

// Pieces every /v1 resource uses: the scope check (an onRequest hook, so 401/403 come before
// any 400 from body or query validation), the documented error responses, and not-found.

export const SECURITY = [{ bearerAuth: [] }];

/** 401 bad token, 403 suspended partner or missing scope; the principal is left on the request. */
export function requireScope(rt: HttpDeps, scope: Scope) {
  return async (req: FastifyRequest, _reply: FastifyReply) => {
    await authenticate(rt.auth, req, scope, req.tokenLookup);
  };
}

export function principalOf(req: FastifyRequest): AuthPrincipal {
  const p = (req as { principal?: AuthPrincipal }).principal;
  if (!p) throw new AppError('unauthorized', 'not authenticated');
  return p;
}

const ERROR_DOCS: Record<number, string> = {
  400: 'invalid request (details name the fields)',
  401: 'missing or invalid bearer token',
  402: 'insufficient balance',
  403: 'insufficient scope, partner suspended, or channel not assigned',
  404: 'not found (also: the id belongs to another partner)',
  409: 'conflict',
  422: 'Idempotency-Key reused with a different body',
  429: 'rate limited; see Retry-After',
};

/** Response schemas for the OpenAPI document: the success ones plus the errors that can occur. */
export function responses(ok: Record<number, z.ZodType>, errors: number[] = []): Record<number, z.ZodType> {
  const out: Record<number, z.ZodType> = { ...ok };
  for (const code of [401, 403, 429, ...errors]) out[code] = errorOut.describe(ERROR_DOCS[code] ?? 'error');
  return out;
}

/** The same 404 for a missing id and another partner's: existence is not disclosed. */
export function notFoundError(what: string, id: string): AppError {
  return new AppError('not_found', `${what} ${id} not found`);
}
