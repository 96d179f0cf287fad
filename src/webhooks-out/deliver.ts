import type { Dispatcher } from 'undici';
import { FailureLog } from '../lib/failure-log.js';
import type { Queryable, Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import { disableEndpointIn, openSecrets, type EndpointRow } from '../core/endpoints.js';
import type { Job } from '../queue/queue.js';
import type { JobResult } from '../queue/settle.js';
import type { JobLogger, Worker } from '../queue/worker.js';
import { postEvent, type AttemptOutcome, type OutConfig } from './client.js';
import { nextDelayMs } from './schedule.js';
import { PreparedSecrets, signatureHeaders } from './signing.js';
import {
  DELIVERY_JOB,
  attemptSql,
  deliveryStateSql,
  endDeliverySql,
  loadForAttempts,
  type AttemptContext,
  type AttemptRecord,
  type DeliveryPayload,
  type DeliveryStatus,
} from './store.js';
import { iso } from '../lib/time.js';

// One attempt of one delivery per job run: the request happens between transactions, and its
// outcome (attempt log, delivery state, endpoint health) commits with the job's own settlement,
// so a crash mid-request repeats the attempt (at-least-once; receivers dedupe on webhook-id)
// and never loses a recorded one. The schedule is ours, not the queue's: every failure returns
// an explicit delay.
//
// The attempts of the deliveries a worker turn claims are loaded together, with one statement
// in the claim's own transaction (onClaim), and their outcomes settled in the worker's batch
// transaction (settleAttempt), through the store: the same statements on either store.

export interface DeliveryDeps {
  ctx: CoreCtx;
  agent: Dispatcher;
  config: OutConfig;
  logger: JobLogger;
  random?: () => number;
  /** Counts each attempt's outcome and each endpoint disabled (the console's overview, metrics). */
  counters?: Counters;
}

/** What an attempt's outcome writes: decided once the request is over, written in the settling transaction. */
export interface AttemptSettle {
  deliveryId: string;
  endpointId: string;
  record: AttemptRecord;
  next: { status: DeliveryStatus; nextAttemptAt: number | null };
  /**
   * The endpoint's health: `ok` ends its failure clock (`clear`: it was running when the
   * attempt was loaded, else nothing is written); `gone` (410) disables it; `failing`
   * starts its clock at `at` (unless running) and disables it once it has run `disableAfterMs`.
   */
  health:
    | { kind: 'ok'; clear: boolean }
    | { kind: 'gone'; reason: string }
    | { kind: 'failing'; at: number; disableAfterMs: number };
}

/** The endpoint, disabled by this settle, and why; null when it was not. */
export type Disabled = { reason: string } | null;

const clearFailingSql = (endpointId: string) =>
  sql`UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ${endpointId} AND failing_since IS NOT NULL`;

// updated_at stays: it versions the endpoint's settings and secrets (secretsFor's cache key).
const markFailingSql = (endpointId: string, at: number) =>
  sql`UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, ${at}) WHERE id = ${endpointId}
      RETURNING failing_since`;

/** Why an endpoint failing since `since` is disabled at `at`, or null while it may go on failing. */
function failingTooLong(since: number, at: number, disableAfterMs: number, lastError: string | null): string | null {
  if (at - since < disableAfterMs) return null;
  const hours = Math.round(((at - since) / 3_600_000) * 10) / 10;
  return `failing continuously since ${iso(since)} (${hours} h); last error: ${lastError ?? 'unknown'}`;
}

/** An attempt's outcome through the store, in the caller's transaction `tx`. */
export async function settleAttempt(ctx: CoreCtx, tx: Queryable, s: AttemptSettle): Promise<Disabled> {
  const now = ctx.now();
  await tx.run(attemptSql(s.deliveryId, s.record, now));
  await tx.run(deliveryStateSql(s.deliveryId, s.record, s.next, now));
  const h = s.health;
  if (h.kind === 'ok') {
    if (h.clear) await tx.run(clearFailingSql(s.endpointId));
    return null;
  }
  let reason = h.kind === 'gone' ? h.reason : null;
  if (h.kind === 'failing') {
    const since = (await tx.get<{ failing_since: number }>(markFailingSql(s.endpointId, h.at)))!.failing_since;
    reason = failingTooLong(since, h.at, h.disableAfterMs, s.record.error);
  }
  return reason !== null && (await disableEndpointIn(ctx, tx, s.endpointId, reason)) ? { reason } : null;
}

export function registerDelivery(worker: Worker, deps: DeliveryDeps) {
  const { ctx, config } = deps;
  const disableAfterMs = config.disableAfterHours * 3_600_000;
  const prepared = new Map<string, { version: string; secrets: PreparedSecrets }>();
  // What onClaim loaded for each job it claimed (null: the delivery is gone), taken by its handler.
  const claimed = new WeakMap<Job<DeliveryPayload>, AttemptContext | null>();
  // Failed attempts at info, summed up per endpoint while it keeps failing.
  const failures = new FailureLog(deps.logger, { what: 'webhook deliveries' });

  // Unsealing and decoding per request would cost more than the HMACs; endpoints change rarely.
  function secretsFor(ep: EndpointRow, now: number): PreparedSecrets {
    const inGrace = ep.previous_secret !== null && (ep.previous_secret_expires_at ?? 0) > now;
    const version = `${ep.updated_at}:${inGrace}`;
    const hit = prepared.get(ep.id);
    if (hit && hit.version === version) return hit.secrets;
    const secrets = new PreparedSecrets(openSecrets(ctx, ep, now));
    prepared.set(ep.id, { version, secrets });
    return secrets;
  }

  function cancel(deliveryId: string, reason: string): JobResult {
    return {
      type: 'ok',
      apply: async (tx) => {
        await tx.run(endDeliverySql(deliveryId, 'cancelled', reason, ctx.now()));
      },
    };
  }

  function record(out: AttemptOutcome, attemptNo: number): AttemptRecord {
    return { attemptNo, status: out.status, durationMs: out.durationMs, snippet: out.snippet, error: out.error };
  }

  /** The worker's settle of one attempt, with its counters and log line when it disabled the endpoint. */
  function settled(s: AttemptSettle, url: string) {
    return async (tx: Tx) => {
      const disabled = await settleAttempt(ctx, tx, s);
      if (!disabled) return;
      deps.counters?.endpointDisabled();
      deps.logger.warn(
        { endpointId: s.endpointId, url, reason: disabled.reason },
        s.health.kind === 'gone' ? 'webhook endpoint disabled: 410 Gone' : 'webhook endpoint disabled',
      );
    };
  }

  const handler = async (job: Job<DeliveryPayload>): Promise<JobResult> => {
    let a = claimed.get(job);
    claimed.delete(job);
    // Only a job its claim did not load (none today) is loaded on its own.
    if (a === undefined) a = (await loadForAttempts(ctx, ctx.store, [job.payload.d])).get(job.payload.d) ?? null;
    if (!a || a.delivery.status !== 'pending') return { type: 'ok' };
    const ep = a.endpoint;
    const id = a.delivery.id;
    if (ep.deleted_at !== null) return cancel(id, 'endpoint deleted');
    if (ep.status !== 'enabled')
      return cancel(id, `endpoint disabled${ep.disabled_reason ? `: ${ep.disabled_reason}` : ''}`);

    const now = ctx.now();
    const eventId = a.delivery.event_id;
    const headers = signatureHeaders(eventId, Math.floor(now / 1000), a.body, secretsFor(ep, now));
    const out = await postEvent(deps.agent, ep.url, a.body, headers, config.timeoutMs, ctx.now);
    const rec = record(out, a.delivery.attempts + 1);
    deps.counters?.delivery(out.ok ? 'ok' : 'failed');
    const settle = (next: AttemptSettle['next'], health: AttemptSettle['health']): AttemptSettle => ({
      deliveryId: id,
      endpointId: ep.id,
      record: rec,
      next,
      health,
    });

    if (out.ok) {
      failures.success(ep.id, { endpointId: ep.id });
      // The failure clock as loaded: nothing to clear when it was not running.
      return {
        type: 'ok',
        apply: settled(settle(SUCCEEDED, { kind: 'ok', clear: ep.failing_since !== null }), ep.url),
      };
    }
    if (out.status === 410) {
      const reason = `the endpoint answered 410 Gone on ${iso(ctx.now())}`;
      return {
        type: 'ok',
        apply: settled(settle({ status: 'failed', nextAttemptAt: null }, { kind: 'gone', reason }), ep.url),
      };
    }

    const at = ctx.now();
    failures.failure(
      ep.id,
      out.status === null ? 'no_answer' : `http_${out.status}`,
      {
        endpointId: ep.id,
        url: ep.url.split('?')[0],
        eventId,
        attempt: rec.attemptNo,
        status: out.status,
        error: out.error,
      },
      'webhook delivery to a partner endpoint failed',
    );
    // The endpoint's failure clock as loaded before the request; the settle (markFailing) reads
    // it again, since another delivery's failure may have started it meanwhile.
    const failingFor = at - (ep.failing_since ?? at);
    const failing = { kind: 'failing', at, disableAfterMs } as const;
    const delay = nextDelayMs(config.retryScheduleMs, rec.attemptNo - job.payload.b, {
      retryAfterMs: out.retryAfterMs,
      random: deps.random,
    });
    const giveUp = (status: 'dead' | 'failed'): JobResult => ({
      type: 'ok',
      apply: settled(settle({ status, nextAttemptAt: null }, failing), ep.url),
    });
    if (failingFor >= disableAfterMs) return giveUp('failed');
    if (delay === null) return giveUp('dead');
    return {
      type: 'retry',
      afterMs: delay,
      error: out.error ?? 'failed',
      apply: settled(settle({ status: 'pending', nextAttemptAt: at + delay }, failing), ep.url),
    };
  };

  worker.register<DeliveryPayload>(DELIVERY_JOB, handler, {
    // One statement for the whole claimed batch, in the claim's transaction: no query per delivery.
    onClaim: async (jobs, tx) => {
      const found = await loadForAttempts(
        ctx,
        tx,
        jobs.map((j) => j.payload.d),
      );
      for (const j of jobs) claimed.set(j, found.get(j.payload.d) ?? null);
    },
    // Only reachable when the handler itself keeps throwing: the delivery must not stay pending.
    onDead: async (job, error, tx) => {
      await tx.run(endDeliverySql(job.payload.d, 'dead', `job failed: ${error}`, ctx.now()));
    },
  });
}

const SUCCEEDED = { status: 'succeeded', nextAttemptAt: null } as const;
