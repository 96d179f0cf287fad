import type { FastifyRequest } from 'fastify';
import { AppError } from '../lib/errors.js';
import { bearer, hasScope, type AuthPrincipal, type Scope, type TokenAuthenticator } from '../core/tokens.js';

const MESSAGES: Record<string, string> = {
  missing: 'missing bearer token: send Authorization: Bearer <API_KEY>',
  unknown: 'the bearer token is not valid',
  revoked: 'the bearer token has been revoked',
  expired: 'the bearer token has expired',
};

/** 401 for a bad token, 403 for a suspended partner or a missing scope; else the principal. */
export function authenticate(auth: TokenAuthenticator, req: FastifyRequest, scope: Scope): AuthPrincipal {
  const header = req.headers.authorization;
  const result = auth.authenticate(bearer(typeof header === 'string' ? header : undefined));
  if (!result.ok) {
    if (result.reason === 'partner_suspended') {
      throw new AppError('partner_suspended', 'this partner account is suspended; contact the operator');
    }
    if (header && !bearer(header)) {
      throw new AppError('unauthorized', 'malformed Authorization header: expected "Bearer <API_KEY>"');
    }
    throw new AppError('unauthorized', MESSAGES[result.reason]);
  }
  if (!hasScope(result.principal.scopes, scope)) {
    throw new AppError('insufficient_scope', `this token lacks the "${scope}" scope`, [], { required: scope });
  }
  (req as any).principal = result.principal;
  return result.principal;
}
