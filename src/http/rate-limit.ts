import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthResult, TokenAuthenticator } from '../core/tokens.js';
import { pruneApiRate, type RateAsk, takeApiRate } from '../db/api-rate.js';
import type { Store } from '../db/query.js';
import { Gcra } from '../lib/gcra.js';
import { lookupToken } from './auth.js';
import { sendError } from '../web/errors.js';

// Per-token request limits with GCRA (src/lib/gcra.ts): smooth, O(1), no timers. A token's
// partner may carry its own limit; requests without a valid token are limited per client
// address at the default. GCRA rather than @fastify/rate-limit: its per-key window counter lets
// twice the limit through across a window's end.
//
// On SQLite one msgd serves the API, and the limits live in its memory (RateLimiter). On
// PostgreSQL several msgd may serve it, and a limit is the cluster's (SharedRateLimiter): the
// same GCRA, its state in the database (src/db/api-rate.ts), taken for a whole batch of
// requests in one statement. docs/scale.md has the figures.

export interface Verdict {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the bucket is full again (RateLimit-Reset). */
  resetS: number;
  /** Seconds to wait before a retry can succeed (Retry-After), when refused. */
  retryAfterS: number;
}

const WINDOW_MS = 60_000;

/** Where a request's verdict comes from: this process's memory, or the cluster's database. */
export interface Limiter {
  take(key: string, perMinute: number): Verdict | Promise<Verdict>;
}

/** The limiter for msgd's store: in memory on SQLite, shared through the database on PostgreSQL. */
export function limiterFor(store: Store, now: () => number = Date.now): Limiter {
  return store.dialect === 'postgres' ? new SharedRateLimiter(store, now) : new RateLimiter(now);
}

export class RateLimiter implements Limiter {
  private readonly gcra: Gcra;

  constructor(now: () => number = Date.now) {
    this.gcra = new Gcra(now);
  }

  take(key: string, perMinute: number): Verdict {
    const window = WINDOW_MS;
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

/**
 * The verdict on the `i`-th (from 0) of a key's requests in a batch taken at `asked` (this
 * instance's clock when the batch began).
 */
function verdictOf(asked: number, perMinute: number, took: { tat: number; taken: number }, i: number): Verdict {
  const interval = WINDOW_MS / perMinute;
  // A key's TAT is never more than the window ahead of the time of the batch that set it. A
  // batch of another instance that began later but reached the key's row first (this one was
  // still making its rows, or waiting for the row) has moved it past `asked` + the window: its
  // time is the key's time, else Retry-After and RateLimit-Reset would count this batch's delay
  // too (11 s where one request is 10 s apart).
  const now = Math.max(asked, took.tat - WINDOW_MS);
  if (i < took.taken) {
    // As RateLimiter: the TAT this request moved the key to.
    const next = took.tat - (took.taken - 1 - i) * interval;
    return {
      allowed: true,
      limit: perMinute,
      remaining: Math.floor((WINDOW_MS - (next - now)) / interval),
      resetS: Math.ceil((next - now) / 1000),
      retryAfterS: 0,
    };
  }
  const wait = took.tat + interval - WINDOW_MS - now;
  return {
    allowed: false,
    limit: perMinute,
    remaining: 0,
    resetS: Math.ceil((took.tat - now) / 1000),
    retryAfterS: Math.max(1, Math.ceil(wait / 1000)),
  };
}

interface Waiting {
  key: string;
  perMinute: number;
  resolve(v: Verdict): void;
  reject(e: unknown): void;
}

/** Keys this process remembers having made a row for; past this, it forgets them all. */
const KNOWN_KEYS_MAX = 100_000;
/** How often an instance deletes the rows whose TAT has passed. */
const PRUNE_EVERY_MS = 60_000;

/**
 * The cluster's limits on PostgreSQL: GCRA as RateLimiter, its TAT in api_rate_limits. One
 * statement in flight per process: the requests that arrive meanwhile wait for the next, which
 * takes all of them at once (their keys in one UPDATE), so a busy instance makes far fewer
 * statements than requests, and a quiet one answers after one round trip. Exact across the
 * instances: a key's row is locked while a batch takes from it. While the database does not
 * answer or refuses the write, the instance limits by its own memory (as RateLimiter), so every
 * answer keeps its RateLimit headers; a request that needs the database fails there (503).
 */
export class SharedRateLimiter implements Limiter {
  private queue: Waiting[] = [];
  private running = false;
  private readonly known = new Set<string>();
  private prunedAt: number;
  /** The limits while the database cannot take a batch. */
  private readonly local: RateLimiter;
  /** Statements taken and requests decided, for tests and the docs' figures. */
  readonly stats = { batches: 0, requests: 0 };

  constructor(
    private readonly store: Store,
    private readonly now: () => number = Date.now,
  ) {
    this.prunedAt = now();
    this.local = new RateLimiter(now);
  }

  take(key: string, perMinute: number): Promise<Verdict> {
    return new Promise<Verdict>((resolve, reject) => {
      this.queue.push({ key, perMinute, resolve, reject });
      // The first batch waits for the end of the turn's I/O, so the requests read in one turn share it.
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue;
      this.queue = [];
      const asks = new Map<string, RateAsk & { perMinute: number }>();
      for (const w of batch) {
        const a = asks.get(w.key);
        // A key's requests share its latest limit (a partner's limit changed mid-batch).
        if (a) {
          a.n++;
          a.perMinute = w.perMinute;
          a.intervalMs = WINDOW_MS / w.perMinute;
        } else
          asks.set(w.key, {
            key: w.key,
            n: 1,
            perMinute: w.perMinute,
            intervalMs: WINDOW_MS / w.perMinute,
            toleranceMs: WINDOW_MS,
          });
      }
      const fresh = [...asks.keys()].filter((k) => !this.known.has(k));
      const now = this.now();
      try {
        const took = await takeApiRate(this.store, now, [...asks.values()], fresh);
        if (this.known.size + fresh.length > KNOWN_KEYS_MAX) this.known.clear();
        for (const k of fresh) this.known.add(k);
        this.stats.batches++;
        this.stats.requests += batch.length;
        const seen = new Map<string, number>();
        for (const w of batch) {
          const i = seen.get(w.key) ?? 0;
          seen.set(w.key, i + 1);
          w.resolve(verdictOf(now, asks.get(w.key)!.perMinute, took.get(w.key)!, i));
        }
      } catch {
        // The database did not answer or refused the write: this instance's memory decides
        // meanwhile, and a request that needs the database fails there (503) with its headers.
        for (const w of batch) w.resolve(this.local.take(w.key, w.perMinute));
      }
      this.pruneNowAndThen(now);
    }
    this.running = false;
  }

  private pruneNowAndThen(now: number): void {
    if (now - this.prunedAt < PRUNE_EVERY_MS) return;
    this.prunedAt = now;
    // A row is made again when its key comes back; until then the table keeps only live keys.
    pruneApiRate(this.store, now - WINDOW_MS).catch(() => {});
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The token lookup made by the rate limiter, reused by the route's scope check. */
    tokenLookup?: AuthResult;
  }
}

/** onRequest hook: count the request against its token, set the headers, refuse past the limit. */
export function rateLimitHook(auth: TokenAuthenticator, limiter: Limiter, defaultPerMinute: number) {
  return async (req: FastifyRequest, reply: FastifyReply) => {
    const result = await lookupToken(auth, req);
    req.tokenLookup = result;
    const principal = result.principal;
    const key = principal ? `tok:${principal.tokenId}` : `ip:${req.ip}`;
    const taken = limiter.take(key, principal?.rateLimitPerMinute ?? defaultPerMinute);
    const v = taken instanceof Promise ? await taken : taken;
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
