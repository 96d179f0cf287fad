import type { Dispatcher } from 'undici';
import { FailureLog } from '../lib/failure-log.js';
import { stmt } from '../db/stmt.js';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import { disableEndpoint, openSecrets, type EndpointRow } from '../core/endpoints.js';
import type { Job } from '../queue/queue.js';
import type { JobResult } from '../queue/settle.js';
import type { JobLogger, Worker } from '../queue/worker.js';
import { postEvent, type AttemptOutcome, type OutConfig } from './client.js';
import { nextDelayMs } from './schedule.js';
import { PreparedSecrets, signatureHeaders } from './signing.js';
import {
  DELIVERY_JOB,
  cancelDelivery,
  loadForAttempt,
  recordAttempt,
  type AttemptRecord,
  type DeliveryPayload,
} from './store.js';
import { iso } from '../lib/time.js';

// One attempt of one delivery per job run: the request happens between transactions, and its
// outcome (attempt log, delivery state, endpoint health) commits with the job's own settlement,
// so a crash mid-request repeats the attempt (at-least-once; receivers dedupe on webhook-id)
// and never loses a recorded one. The schedule is ours, not the queue's: every failure returns
// an explicit delay.

export interface DeliveryDeps {
  ctx: CoreCtx;
  agent: Dispatcher;
  config: OutConfig;
  logger: JobLogger;
  random?: () => number;
  /** Counts each attempt's outcome and each endpoint disabled (the console's overview, metrics). */
  counters?: Counters;
}

export function registerDelivery(worker: Worker, deps: DeliveryDeps) {
  const { ctx, config } = deps;
  const disableAfterMs = config.disableAfterHours * 3_600_000;
  const prepared = new Map<string, { version: string; secrets: PreparedSecrets }>();
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

  function markFailing(endpointId: string, at: number): number {
    // updated_at stays: it versions the endpoint's settings and secrets (secretsFor's cache key).
    return stmt<[number, string], { failing_since: number }>(
      ctx.db.sqlite,
      `UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, ?) WHERE id = ? RETURNING failing_since`,
    ).get(at, endpointId)!.failing_since;
  }

  function clearFailing(endpointId: string) {
    stmt(
      ctx.db.sqlite,
      'UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL',
    ).run(endpointId);
  }

  function cancel(deliveryId: string, reason: string): JobResult {
    return { type: 'ok', apply: () => cancelDelivery(ctx, deliveryId, reason) };
  }

  function record(out: AttemptOutcome, attemptNo: number): AttemptRecord {
    return { attemptNo, status: out.status, durationMs: out.durationMs, snippet: out.snippet, error: out.error };
  }

  const handler = async (job: Job<DeliveryPayload>): Promise<JobResult> => {
    const a = loadForAttempt(ctx, job.payload.d);
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

    if (out.ok) {
      failures.success(ep.id, { endpointId: ep.id });
      return {
        type: 'ok',
        apply: () => {
          recordAttempt(ctx, id, rec, { status: 'succeeded', nextAttemptAt: null });
          if (ep.failing_since !== null) clearFailing(ep.id);
        },
      };
    }
    if (out.status === 410) {
      const reason = `the endpoint answered 410 Gone on ${iso(ctx.now())}`;
      return {
        type: 'ok',
        apply: () => {
          recordAttempt(ctx, id, rec, { status: 'failed', nextAttemptAt: null });
          if (disableEndpoint(ctx, ep.id, reason)) {
            deps.counters?.endpointDisabled();
            deps.logger.warn({ endpointId: ep.id, url: ep.url }, 'webhook endpoint disabled: 410 Gone');
          }
        },
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
    // The endpoint's failure clock as loaded before the request; apply (markFailing) reads it
    // again, since another delivery's failure may have started it meanwhile.
    const failingFor = at - (ep.failing_since ?? at);
    const delay = nextDelayMs(config.retryScheduleMs, rec.attemptNo - job.payload.b, {
      retryAfterMs: out.retryAfterMs,
      random: deps.random,
    });
    const giveUp = (status: 'dead' | 'failed') => () => {
      recordAttempt(ctx, id, rec, { status, nextAttemptAt: null });
      disableIfFailingTooLong(ep, markFailing(ep.id, at), at, out.error);
    };
    if (failingFor >= disableAfterMs) return { type: 'ok', apply: giveUp('failed') };
    if (delay === null) return { type: 'ok', apply: giveUp('dead') };
    return {
      type: 'retry',
      afterMs: delay,
      error: out.error ?? 'failed',
      apply: () => {
        recordAttempt(ctx, id, rec, { status: 'pending', nextAttemptAt: at + delay });
        disableIfFailingTooLong(ep, markFailing(ep.id, at), at, out.error);
      },
    };
  };

  function disableIfFailingTooLong(ep: EndpointRow, since: number, at: number, lastError: string | null) {
    if (at - since < disableAfterMs) return;
    const hours = Math.round(((at - since) / 3_600_000) * 10) / 10;
    const reason = `failing continuously since ${iso(since)} (${hours} h); last error: ${lastError ?? 'unknown'}`;
    if (disableEndpoint(ctx, ep.id, reason)) {
      deps.counters?.endpointDisabled();
      deps.logger.warn({ endpointId: ep.id, url: ep.url, reason }, 'webhook endpoint disabled');
    }
  }

  worker.register<DeliveryPayload>(DELIVERY_JOB, handler, {
    // Only reachable when the handler itself keeps throwing: the delivery must not stay pending.
    onDead: (job, error) => {
      stmt(
        ctx.db.sqlite,
        `UPDATE webhook_deliveries SET status = 'dead', last_error = ?, next_attempt_at = NULL, updated_at = ?
        WHERE id = ? AND status = 'pending'`,
      ).run(`job failed: ${error}`, ctx.now(), job.payload.d);
    },
  });
}
