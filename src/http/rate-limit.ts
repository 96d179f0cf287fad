import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthResult, TokenAuthenticator } from '../core/tokens.js';
import { Gcra } from '../lib/gcra.js';
import { lookupToken } from './auth.js';
import { sendError } from '../web/errors.js';

// Per-token request limits with GCRA (src/lib/gcra.ts): smooth, O(1), no timers. A token's
// partner may carry its own limit; requests without a valid token are limited per client
// address at the default. In memory: one msgd process serves the API. GCRA rather than
// @fastify/rate-limit: its per-key window counter lets twice the limit through across a window's end.

export interface Verdict {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again (RateLimit-Reset). */
  resetS: number;
  /** Seconds to wait before a retry can succeed (Retry-After), when refused. */
  retryAfterS: number;
}

export class RateLimiter {
  private readonly gcra: Gcra;

  constructor(now: () => number = Date.now) {
    this.gcra = new Gcra(now);
  }

  take(key: string, perMinute: number): Verdict {
    const window = 60_000;
    const interval = window / perMinute;
    // Up to a window's worth back to back (the limit as a burst), then one per interval.
    const { now, wait, tat, next } = this.gcra.take(key, interval, window, 0);
    if (wait > 0) {
      return {
        allowed: false,
        limit: perMinute,
        remaining: 0,
        resetS: Math.ceil((tat - now) / 1000),
        retryAfterS: Math.max(1, Math.ceil(wait / 1000)),
      };
    }
    return {
      allowed: true,
      limit: perMinute,
      remaining: Math.floor((window - (next - now)) / interval),
      resetS: Math.ceil((next - now) / 1000),
      retryAfterS: 0,
    };
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The token lookup made by the rate limiter, reused by the route's scope check. */
    tokenLookup?: AuthResult;
  }
}

/** onRequest hook: count the request against its token, set the headers, refuse past the limit. */
export function rateLimitHook(auth: TokenAuthenticator, limiter: RateLimiter, defaultPerMinute: number) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const result = await lookupToken(auth, req);
    req.tokenLookup = result;
    const principal = result.principal;
    const key = principal ? `tok:${principal.tokenId}` : `ip:${req.ip}`;
    const v = limiter.take(key, principal?.rateLimitPerMinute ?? defaultPerMinute);
    reply.header('ratelimit-limit', v.limit);
    reply.header('ratelimit-remaining', v.remaining);
    reply.header('ratelimit-reset', v.resetS);
    if (!v.allowed) {
      reply.header('retry-after', v.retryAfterS);
      return sendError(
        reply,
        'rate_limited',
        `too many requests: the limit is ${v.limit} per minute; retry in ${v.retryAfterS} s`,
        [],
        429,
      );
    }
  };
}
