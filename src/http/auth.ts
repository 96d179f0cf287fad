import type { FastifyRequest } from 'fastify';
import { AppError } from '../lib/errors.js';
import { bearer, hasScope, type AuthPrincipal, type AuthResult, type Scope, type TokenAuthenticator } from '../core/tokens.js';

const MESSAGES: Record<string, string> = {
  missing: 'missing bearer token: send Authorization: Bearer <API_KEY>',
  unknown: 'the bearer token is not valid',
  revoked: 'the bearer token has been revoked',
  expired: 'the bearer token has expired',
};

/** The token check alone, without deciding anything: for the rate limiter, which keys by token. */
export function lookupToken(auth: TokenAuthenticator, req: FastifyRequest): AuthResult {
  const header = req.headers.authorization;
  return auth.authenticate(bearer(typeof header === 'string' ? header : undefined));
}

/**
 * 401 for a bad token, 403 for a suspended partner or a missing scope; else the principal.
 * `result` is a lookupToken() already made for this request (saves a second lookup).
 */
export function authenticate(auth: TokenAuthenticator, req: FastifyRequest, scope: Scope, result: AuthResult = lookupToken(auth, req)): AuthPrincipal {
  const header = req.headers.authorization;
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
