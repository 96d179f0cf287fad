import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import { stmt } from '../db/stmt.js';
import { sleep } from '../lib/time.js';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { GatewayWithSecrets } from '../core/gateway-secrets.js';
import {
  applyStatus,
  flagUncertain,
  getMessageRow,
  getMessageState,
  markSent,
  type MessageRow,
} from '../core/messages.js';
import type { MessageContent } from '../core/message-content.js';
import { getAdapter } from '../providers/registry.js';
import { redactSecrets } from '../providers/send-results.js';
import type { OutboundMessage, SendResult } from '../providers/types.js';
import type { Job, JobQueue } from '../queue/queue.js';
import type { RateShaper } from '../queue/rate.js';
import type { GatewayBook } from './gateway-book.js';
import type { JobResult } from '../queue/settle.js';
import type { Worker } from '../queue/worker.js';

// The dispatch job: one provider call per message, between transactions. The outcome and
// the job's completion commit together (apply), so a crash between them re-runs the call
// (at-least-once to the provider) and never loses the result of a committed one.

export const DISPATCH_JOB = 'message.dispatch';
export const SANDBOX_REPORT_JOB = 'sandbox.report';

/** The enqueue the accept transaction is given (src/core/send.ts): one dispatch job per message. */
export function dispatchEnqueuer(queue: JobQueue): (messageId: string) => void {
  return (messageId) => {
    queue.enqueue({ kind: DISPATCH_JOB, payload: { message_id: messageId } });
  };
}

/**
 * How often a message on a disabled gateway looks again: 15 s at first, longer the longer it
 * has waited (a tenth of its wait, up to 5 min), spread by up to a third, so a large paused
 * backlog is claimed a few times an hour, not every 15 s, and not all at once. Never longer
 * than jobs.backoffCapMs.
 */
export function disabledRecheckMs(waitedMs: number, backoffCapMs: number, random = Math.random): number {
  const base = Math.min(Math.max(15_000, waitedMs / 10), 300_000);
  return Math.round(Math.min(base * (1 + random() / 3), backoffCapMs));
}

/** Waits up to this long in-process for the gateway's rate; longer waits snooze the job. */
const MAX_INLINE_WAIT_MS = 250;

/** Is the message still waiting for its provider call (not yet settled by any attempt)? */
export function awaitsDispatch(m: Pick<MessageRow, 'status'>): boolean {
  return m.status === 'queued' || m.status === 'sending';
}

/** The columns of a message its dispatch reads (a claim returns only these). */
type DispatchRow = Pick<
  MessageRow,
  'id' | 'partner_id' | 'channel_type' | 'gateway_id' | 'to' | 'from' | 'content' | 'status' | 'created_at'
>;
const DISPATCH_COLUMNS = 'id, partner_id, channel_type, gateway_id, "to", "from", content, status, created_at';

export interface DispatchDeps {
  ctx: CoreCtx;
  config: Config;
  dispatcher: Dispatcher;
  shaper: RateShaper;
  gateways: GatewayBook;
  logger: Logger;
  /** msgd's base URL for callbacks from a provider at this base URL (see Runtime.callbackBase). */
  callbackBase: (providerBaseUrl?: string) => string | null;
}

interface DispatchPayload {
  message_id: string;
}

export function registerDispatch(worker: Worker, deps: DispatchDeps) {
  const { ctx } = deps;

  function ratePerSecond(gw: GatewayWithSecrets): number {
    return gw.settings.rate_per_second ?? deps.config.dispatch.ratePerSecond[gw.kind];
  }

  /** The gateway's base_url setting, or undefined when it talks to the provider's real host. */
  function providerBase(gw: GatewayWithSecrets): string | undefined {
    return typeof gw.settings.base_url === 'string' ? gw.settings.base_url : undefined;
  }

  function outbound(m: DispatchRow): OutboundMessage {
    const content = JSON.parse(m.content) as MessageContent;
    if (content.kind !== 'text' && content.kind !== 'template' && content.kind !== 'email')
      throw new Error(`outbound ${content.kind} messages are not supported`);
    return { id: m.id, channel: m.channel_type, to: m.to, from: m.from, content };
  }

  /** A message the claim found ready to go: its gateway, and the rate's short wait before the call. */
  interface Go {
    m: DispatchRow;
    gw: GatewayWithSecrets;
    wait: number;
  }
  // Decided in the claim transaction (onClaim), for the handler that runs right after it.
  const ready = new WeakMap<Job, Go>();

  // The gateways' lines. A message that cannot go within MAX_INLINE_WAIT_MS reserves the next
  // free slot of its gateway's rate (the shaper's TAT moves past it, so whoever asks next gets
  // the slot after) and is snoozed until then: a place in line, first come first served, one
  // slot apart. At its place it goes without asking again. Kept in memory, as the shaper is:
  // a place whose snooze was rolled back is found again here, and at start every waiting
  // message is woken to take a new place in the order it was accepted (lineUp).
  interface Place {
    gatewayId: string;
    at: number;
    /** The gateway's line it was given in: a rate change or re-enable starts a new line. */
    line: number;
    /** Moved back behind others that fell due with it (a line that fell behind). */
    respaced?: boolean;
  }
  const places = new Map<number, Place>();
  const lineOf = new Map<string, number>();
  // Per gateway, the earliest a message from its line may go: places that come due together
  // (claimed late, after a stall or with every slot busy) go one slot apart, not in a burst.
  const nextGo = new Map<string, number>();
  /** The next message from the gateway's line goes no sooner than one slot after `at`. */
  const spaceAfter = (gatewayId: string, at: number, interval: number) =>
    nextGo.set(gatewayId, Math.max(nextGo.get(gatewayId) ?? 0, at + interval));
  // Each gateway's status and rate as last seen: a change wakes the messages waiting in its line.
  let seen = new Map<string, { active: boolean; rate: number; name: string }>();
  let seenGeneration = -1;

  /** This job's place in its gateway's current line, if it has one; any other is forgotten. */
  function placeOf(jobId: number, gatewayId: string | null): Place | undefined {
    const p = places.get(jobId);
    if (p === undefined) return undefined;
    if (p.gatewayId === gatewayId && p.line === (lineOf.get(p.gatewayId) ?? 0)) return p;
    places.delete(jobId);
    return undefined;
  }

  /**
   * What a claimed job does: go (its gateway and the rate's short wait), or a result settled in
   * the claim itself, so a message that must wait is never seen 'sending' and a crash cannot
   * leave it claimed with nothing in flight (which would flag it a possible duplicate).
   * `marked`: the row the claim marked 'sending'; a retry (already 'sending') is read here.
   */
  function decide(job: Job<DispatchPayload>, marked: DispatchRow | undefined): Go | JobResult {
    const m = marked ?? getMessageRow(ctx, job.payload.message_id);
    const place = placeOf(job.id, m?.gateway_id ?? null);
    if (place) places.delete(job.id);
    // Already settled by an earlier attempt whose job completion was lost: nothing to send.
    if (!m || !awaitsDispatch(m)) return { type: 'ok' };
    if (!m.gateway_id) return failNow(m, 'no_gateway', 'the message has no gateway');
    // A gateway changed by msgctl (disabled, new credentials, removed) is seen on the next turn.
    const gw = deps.gateways.get(m.gateway_id);
    if (!gw) return failNow(m, 'gateway_removed', 'the gateway of this message was removed');
    if (gw.status !== 'active') {
      // Disabled is paused: the message keeps its place (a snooze spends no attempt) and says why.
      // It goes out once the gateway is enabled again (which wakes it); removing the gateway
      // fails and refunds it. (It used to spend its attempts and fail within the hour.)
      const note = `gateway ${gw.name} is disabled: the message waits until it is enabled`;
      return {
        type: 'snooze',
        afterMs: disabledRecheckMs(ctx.now() - m.created_at, deps.config.jobs.backoffCapMs),
        apply: () => {
          stmt(
            ctx.db.sqlite,
            `UPDATE messages SET status = 'queued', error_code = 'gateway_disabled', error_message = ?, updated_at = ? WHERE id = ? AND status IN ('queued', 'sending')`,
          ).run(note, ctx.now(), m.id);
        },
      };
    }
    const now = ctx.now();
    const rate = ratePerSecond(gw);
    const interval = 1000 / rate;
    if (place) {
      // At its place: it goes. Early (a snooze rolled back with its batch): back to it. Late,
      // with others: one slot after the last, so a line that fell behind catches up at the rate.
      // A place handed out again below is a slot of its own already: only a first place can find
      // others ahead of it. Each late one takes the slot after the last, in the order they are
      // claimed, which is their places' order.
      const at = Math.max(place.at, place.respaced ? 0 : (nextGo.get(gw.id) ?? 0), now);
      const wait = Math.ceil(at - now);
      if (wait <= MAX_INLINE_WAIT_MS || at > place.at) spaceAfter(gw.id, at, interval);
      if (wait <= MAX_INLINE_WAIT_MS) return { m, gw, wait };
      places.set(job.id, { ...place, at, respaced: at > place.at || place.respaced });
      return inLine(m, wait);
    }
    const wait = deps.shaper.take(gw.id, rate, 1, Infinity);
    if (wait <= MAX_INLINE_WAIT_MS) {
      spaceAfter(gw.id, now + wait, interval);
      return { m, gw, wait };
    }
    // A longer wait (a backlog on a 1/s Twilio number can wait hours): a place in line.
    places.set(job.id, { gatewayId: gw.id, at: now + wait, line: lineOf.get(gw.id) ?? 0 });
    return inLine(m, wait);
  }

  /** Waiting for the gateway's rate: nothing is in flight, so the partner sees 'queued'. */
  function inLine(m: DispatchRow, afterMs: number): JobResult {
    return {
      type: 'snooze',
      afterMs,
      apply: () => {
        // A note that its gateway was disabled is old news once it is waiting for the rate.
        stmt(
          ctx.db.sqlite,
          `UPDATE messages SET status = 'queued', error_code = CASE WHEN error_code = 'gateway_disabled' THEN NULL ELSE error_code END,
             error_message = CASE WHEN error_code = 'gateway_disabled' THEN NULL ELSE error_message END, updated_at = ? WHERE id = ? AND status = 'sending'`,
        ).run(ctx.now(), m.id);
      },
    };
  }

  /**
   * The messages waiting for a gateway (null: for every active gateway) are woken to take new
   * places in the order they were accepted (their run_at becomes their acceptance time): the
   * gateway was enabled again, disabled or removed, or given another rate (places given at the
   * old rate, or rechecks minutes apart), or msgd has just started (the places were in memory).
   * Its own transaction, before a claim; a throw leaves the change to be handled next turn.
   */
  function lineUp(gatewayId: string | null, why: string, then = 'its waiting messages take new places in line') {
    if (gatewayId !== null) {
      lineOf.set(gatewayId, (lineOf.get(gatewayId) ?? 0) + 1);
      nextGo.delete(gatewayId);
      // Slots already reserved within the inline wait stay; the line beyond them starts over.
      deps.shaper.rebase(gatewayId, MAX_INLINE_WAIT_MS);
    }
    const now = ctx.now();
    const woken = stmt(
      ctx.db.sqlite,
      `UPDATE jobs SET run_at = MIN(created_at, ?), updated_at = ? WHERE kind = ? AND state = 'available' AND run_at > ?
         AND EXISTS (SELECT 1 FROM messages m LEFT JOIN gateways g ON g.id = m.gateway_id
           WHERE m.id = json_extract(jobs.payload, '$.message_id') AND m.status = 'queued'
             AND (? IS NULL OR m.gateway_id = ?) AND (? IS NOT NULL OR g.status = 'active'))`,
    ).run(now, now, DISPATCH_JOB, now, gatewayId, gatewayId, gatewayId).changes;
    if (woken > 0) deps.logger.info({ gatewayId, woken }, `${why}: ${then}`);
  }

  // Before each claim: a gateway enabled, disabled, removed or given another rate wakes its line.
  worker.beforeClaim(() => {
    const generation = deps.gateways.generation();
    if (generation === seenGeneration) return;
    const first = seenGeneration === -1;
    if (first) lineUp(null, 'msgd started');
    const next = new Map<string, { active: boolean; rate: number; name: string }>();
    for (const gw of deps.gateways.all()) {
      const now = { active: gw.status === 'active', rate: ratePerSecond(gw), name: gw.name };
      next.set(gw.id, now);
      const was = seen.get(gw.id);
      if (first || !was) continue;
      if (was.active && !now.active)
        lineUp(gw.id, `gateway ${gw.name} disabled`, 'its waiting messages wait until it is enabled');
      else if (!was.active && now.active) lineUp(gw.id, `gateway ${gw.name} enabled`);
      else if (now.active && was.rate !== now.rate) lineUp(gw.id, `gateway ${gw.name} rate changed to ${now.rate}/s`);
    }
    for (const [id, was] of seen) {
      if (next.has(id)) continue;
      lineUp(id, `gateway ${was.name} removed`, 'its waiting messages fail and are refunded');
    }
    // Only once every change was handled: a throw above has them all looked at again next turn.
    seen = next;
    seenGeneration = generation;
  });

  const handler = async (job: Job<DispatchPayload>): Promise<JobResult> => {
    // Every claimed job has been decided in the claim (onClaim); this covers one that was not.
    const go = ready.get(job) ?? decide(job, undefined);
    ready.delete(job);
    if ('type' in go) return go;
    const { m, gw, wait } = go;
    if (wait > 0) await sleep(wait);

    // When the message was handed over: its sent_at. The provider stamps it later than this,
    // and Messenger's delivery and read watermarks are compared with that stamp.
    const startedAt = ctx.now();
    let result: SendResult;
    try {
      result = await getAdapter(gw.kind).send(
        { id: gw.id, kind: gw.kind, name: gw.name, settings: gw.settings, secrets: gw.secrets },
        outbound(m),
        {
          dispatcher: deps.dispatcher,
          timeoutMs: deps.config.dispatch.timeoutMs,
          publicUrl: deps.callbackBase(providerBase(gw)),
          now: ctx.now,
        },
      );
    } catch (e: any) {
      result = { outcome: 'retry', message: e?.message ?? String(e) };
    }
    if (result.outcome !== 'accepted') result = { ...result, message: redactSecrets(result.message, gw.secrets) };
    const uncertain = job.reclaims > 0;
    switch (result.outcome) {
      case 'accepted': {
        const r = result;
        const enqueueSandboxReport = () => {
          if (gw.kind !== 'sandbox') return;
          const delay = Number(gw.settings.delivery_delay_ms ?? 300);
          worker.queue.enqueue({
            kind: SANDBOX_REPORT_JOB,
            payload: { gateway_id: gw.id, provider_message_id: r.providerMessageId, status: 'delivered' },
            runAt: ctx.now() + delay,
          });
        };
        return {
          type: 'ok',
          apply: () => {
            const namedInReports = r.namedInReports === true;
            const change = {
              providerMessageId: r.providerMessageId,
              namedInReports,
              providerStatus: r.providerStatus ?? null,
              occurredAt: startedAt,
              uncertain,
            };
            if (markSent(ctx, m, change)) return enqueueSandboxReport();
            const fresh = getMessageState(ctx, m.id)!;
            if (uncertain) flagUncertain(ctx, m.id);
            const moved = applyStatus(ctx, fresh, {
              status: 'sent',
              providerMessageId: r.providerMessageId,
              namedInReports,
              providerStatus: r.providerStatus ?? null,
              occurredAt: startedAt,
            });
            // The note an earlier retry left (429, timeout) is not this message's error: it was sent.
            if (moved.changed && fresh.error_code !== null) {
              stmt(ctx.db.sqlite, 'UPDATE messages SET error_code = NULL, error_message = NULL WHERE id = ?').run(m.id);
            }
            enqueueSandboxReport();
          },
        };
      }
      case 'failed':
        return failNow(m, result.code, result.message, uncertain);
      case 'retry': {
        const note = `${result.code ? `${result.code}: ` : ''}${result.message}`;
        return {
          type: 'retry',
          // The provider's hint (Retry-After, or Meta's few seconds on a rate limit) is the
          // earliest retry, not the schedule: a limit that lasts gets the backoff's growing
          // delays, not twelve tries a few seconds apart and a failed message a minute later.
          minAfterMs: result.retryAfterMs,
          error: note,
          apply: () => {
            // A timeout or reset after the request left may have been accepted: the next
            // attempt could send it twice, and the message says so from now on.
            if (uncertain || result.maybeDelivered) flagUncertain(ctx, m.id);
            // Only a message still waiting for its dispatch: a provider report may have settled it.
            stmt(
              ctx.db.sqlite,
              `UPDATE messages SET error_code = ?, error_message = ?, updated_at = ? WHERE id = ? AND status IN ('queued', 'sending')`,
            ).run(result.code ?? 'retrying', result.message, ctx.now(), m.id);
          },
        };
      }
    }
  };

  function failNow(m: DispatchRow, code: string, message: string, uncertain = false): JobResult {
    return {
      type: 'ok',
      apply: () => {
        const fresh = getMessageState(ctx, m.id)!;
        if (uncertain) flagUncertain(ctx, m.id);
        applyStatus(ctx, fresh, { status: 'failed', errorCode: code, errorMessage: message, refundOnFailure: true });
      },
    };
  }

  worker.register<DispatchPayload>(DISPATCH_JOB, handler, {
    // Mark the batch 'sending' in the claim transaction (no extra commit per message) and
    // decide each job there: the messages that go are kept for the handler; those that wait
    // (a paused gateway, the gateway's rate) or need no call are settled in the claim itself.
    onClaim: (jobs) => {
      const mark = stmt<[number, string], DispatchRow>(
        ctx.db.sqlite,
        `UPDATE messages SET status = 'sending', updated_at = ? WHERE id = ? AND status = 'queued' RETURNING ${DISPATCH_COLUMNS}`,
      );
      const now = ctx.now();
      const settled = new Map<Job<DispatchPayload>, JobResult>();
      for (const j of jobs) {
        const d = decide(j, mark.get(now, j.payload.message_id));
        if ('type' in d) settled.set(j, d);
        else ready.set(j, d);
      }
      return settled;
    },
    // Retries exhausted: the message is failed and the partner gets the money back (issue 3:
    // "a message that exhausts its retries is failed and refunded"). If an attempt may have
    // reached the provider (a timeout or reset after sending, or a crash mid-call), the outcome
    // is unknown: the message is also flagged and says so. A delivery report that finds it later
    // (Twilio's callback and SendGrid's custom_args name msgd's id) charges it again (applyStatus);
    // otherwise the operator can check with the provider (msgctl messages list --uncertain).
    onDead: (job, error) => {
      const m = getMessageState(ctx, job.payload.message_id);
      if (m && awaitsDispatch(m)) {
        const unknown = m.dispatch_uncertain === 1 || job.reclaims > 0;
        if (unknown) flagUncertain(ctx, m.id);
        applyStatus(ctx, m, {
          status: 'failed',
          errorCode: unknown ? 'outcome_unknown' : 'retries_exhausted',
          errorMessage: unknown
            ? `gave up after ${job.attempts} attempts, and an attempt may have reached the provider (refunded; the operator can check with the provider): ${error}`
            : `gave up after ${job.attempts} attempts: ${error}`,
          refundOnFailure: true,
        });
      }
    },
  });
}
