import type { FastifyRequest } from 'fastify';
import { AppError } from '../lib/errors.js';
import {
  bearer,
  hasScope,
  type AuthPrincipal,
  type AuthResult,
  type Scope,
  type TokenAuthenticator,
} from '../core/tokens.js';

const MESSAGES: Record<string, string> = {
  missing: 'missing bearer token: send Authorization: Bearer <API_KEY>',
  unknown: 'the bearer token is not valid',
  revoked: 'the bearer token has been revoked',
  expired: 'the bearer token has expired',
};

/** The token check alone, without deciding anything: for the rate limiter, which keys by token. */
export async function lookupToken(auth: TokenAuthenticator, req: FastifyRequest): Promise<AuthResult> {
  const header = req.headers.authorization;
  // Several Authorization headers name no token (authenticate says why): counted by address.
  if (header !== undefined && authorizationHeaders(req.raw.rawHeaders) > 1) return { ok: false, reason: 'unknown' };
  return auth.authenticate(bearer(typeof header === 'string' ? header : undefined));
}

/**
 * 401 for a bad token, 403 for a suspended partner or a missing scope; else the principal.
 * `result` is a lookupToken() already made for this request (saves a second lookup).
 */
export async function authenticate(
  auth: TokenAuthenticator,
  req: FastifyRequest,
  scope: Scope,
  lookup?: AuthResult,
): Promise<AuthPrincipal> {
  const result = lookup ?? (await lookupToken(auth, req));
  const header = req.headers.authorization;
  if (!result.ok) {
    // Node keeps the first of several Authorization headers and drops the rest: which token
    // was meant is then a guess (a revoked one after a valid one would pass). lookupToken()
    // finds no token for such a request, so only a failed lookup needs to look for them.
    if (header !== undefined && authorizationHeaders(req.raw.rawHeaders) > 1) {
      const message = 'more than one Authorization header: send exactly one';
      throw new AppError('unauthorized', message, [], { wwwAuthenticate: challenge(message) });
    }
    if (result.reason === 'partner_suspended') {
      throw new AppError('partner_suspended', 'this partner account is suspended; contact the operator');
    }
    // RFC 6750 §3: a bare challenge when no bearer credentials came, invalid_token when they did.
    const offeredBearer = typeof header === 'string' && /^Bearer(\s|$)/i.test(header);
    // "Bearer" with no token sent no credentials: the bare challenge (RFC 6750 section 3.1).
    if (typeof header === 'string' && /^\s*Bearer\s*$/i.test(header)) {
      throw new AppError('unauthorized', MESSAGES.missing, [], { wwwAuthenticate: 'Bearer' });
    }
    if (header && !bearer(header)) {
      const message = 'malformed Authorization header: expected "Bearer <API_KEY>"';
      throw new AppError('unauthorized', message, [], {
        wwwAuthenticate: offeredBearer ? challenge(message) : 'Bearer',
      });
    }
    const message = MESSAGES[result.reason];
    throw new AppError('unauthorized', message, [], {
      wwwAuthenticate: result.reason === 'missing' ? 'Bearer' : challenge(message),
    });
  }
  if (!hasScope(result.principal.scopes, scope)) {
    throw new AppError('insufficient_scope', `this token lacks the "${scope}" scope`, [], { required: scope });
  }
  (req as any).principal = result.principal;
  return result.principal;
}

function authorizationHeaders(raw: string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i].length === 13 && raw[i].toLowerCase() === 'authorization') n++;
  return n;
}

const challenge = (description: string) =>
  `Bearer error="invalid_token", error_description="${description.replace(/["\\]/g, "'")}"`;

/** onRequest hook: 401/403 before the body is read, so they outrank 413 and 415. */
export function authHook(auth: TokenAuthenticator, scope: Scope) {
  return async (req: FastifyRequest) => {
    await authenticate(auth, req, scope, req.tokenLookup);
  };
}
