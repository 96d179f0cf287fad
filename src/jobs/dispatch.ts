import { applySuppressionSignal, applySuppressionSignalIn, type SuppressionSignal } from '../core/suppressions.js';
import type { Dispatcher } from 'undici';
import type { Logger } from 'pino';
import { jsonText } from '../db/dialect.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { sleep } from '../lib/time.js';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import type { GatewayWithSecrets } from '../core/gateway-secrets.js';
import {
  getMessageRow,
  getMessageRowIn,
  getMessageState,
  getMessageStateIn,
  type MessageRow,
} from '../core/messages.js';
import {
  applyStatus,
  applyStatusIn,
  claimForDispatch,
  claimForDispatchIn,
  claimManyForDispatchIn,
  clearDispatchError,
  clearDispatchErrorIn,
  flagUncertain,
  flagUncertainIn,
  holdForDisabledGateway,
  holdForDisabledGatewayIn,
  markDispatchInFlight,
  markDispatchInFlightIn,
  markManyInFlightIn,
  markSent,
  markSentIn,
  noteDispatchRetry,
  noteDispatchRetryIn,
  requeueForRate,
  requeueForRateIn,
  type DispatchRow,
} from '../core/message-status.js';
import type { MessageContent } from '../core/message-content.js';
import { releaseScheduled, releaseScheduledIn } from '../core/scheduled.js';
import { getAdapter } from '../providers/registry.js';
import { redactSecrets } from '../providers/send-results.js';
import type { CallPool, OutboundMessage, SendResult } from '../providers/types.js';
import type { Job, JobQueue } from '../queue/queue.js';
import type { Queryable, Tx } from '../db/query.js';
import type { RateShaper } from '../queue/rate.js';
import { CallSlots } from './call-slots.js';
import type { GatewayBook } from './gateway-book.js';
import { GatewayLines, type Turn } from './gateway-lines.js';
import { LinePace } from './line-pace.js';
import { SharedGatewayLines } from './shared-lines.js';
import type { CircuitBreakers } from './circuit-breaker.js';
import { Failover } from './failover.js';
import { sendAttemptLog } from './send-log.js';
import type { Apply, JobResult } from '../queue/settle.js';
import type { Worker } from '../queue/worker.js';

// The dispatch job: one provider call per message, between transactions. The outcome and
// the job's completion commit together (apply), so a crash between them re-runs the call
// (at-least-once to the provider) and never loses the result of a committed one.
//
// Which re-run may be a duplicate: before a provider request for a message can be written,
// its dispatch_in_flight mark is committed (in the claim that takes the job when a connection
// is free then, else in the worker's next batch once one is: a write per call, a commit per
// turn), and the attempt's outcome clears it. A job taken back after a crash finds the mark
// set only if its request may have left msgd, and only then is the message flagged
// possible_duplicate; one that was still waiting for a free connection is not. A call marked
// by its claim may still be waiting out its gateway's rate (at most MAX_INLINE_WAIT_MS, a few
// calls per gateway at a time): marking those after their wait would cost each a turn, and
// calls that share a commit would leave together, off the rate's spacing.
//
// On both stores: on SQLite the claim's and the settles' writes are the synchronous core forms
// on the connection (the worker's batch runs them in one turn, no await per statement); on
// PostgreSQL the same writes are the core's async forms (`…In`) through the batch's Tx. Each
// write below is given as the pair, `both(sync, viaTx)`. The provider call is never inside a
// transaction on either.

export const DISPATCH_JOB = 'message.dispatch';

/** The enqueue the accept is given (src/core/accept.ts): one dispatch job per message, in its store transaction. */
export function dispatchEnqueuer(
  queue: JobQueue,
): (tx: Queryable, messageId: string, runAt?: number) => Promise<unknown> {
  return (tx, messageId, runAt) => queue.enqueue(tx, { kind: DISPATCH_JOB, payload: { message_id: messageId }, runAt });
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

/** Is the message still waiting for its provider call (not yet settled by any attempt)? */
export function awaitsDispatch(m: Pick<MessageRow, 'status'>): boolean {
  return m.status === 'queued' || m.status === 'sending';
}

export interface DispatchDeps {
  ctx: CoreCtx;
  config: Config;
  dispatcher: Dispatcher;
  shaper: RateShaper;
  gateways: GatewayBook;
  logger: Logger;
  /** Counts each provider call's outcome (the console's overview, metrics). */
  counters?: Counters;
  /** msgd's base URL for callbacks from a provider at this base URL (see Runtime.callbackBase). */
  callbackBase: (providerBaseUrl?: string) => string | null;
  /** Each gateway's circuit breaker (one per process); failover consults it (src/jobs/failover.ts). */
  breakers: CircuitBreakers;
}

const OUTCOME_COUNTED = { accepted: 'sent', failed: 'failed', retry: 'retried' } as const;

interface DispatchPayload {
  message_id: string;
}

export function registerDispatch(worker: Worker, deps: DispatchDeps) {
  const { ctx } = deps;
  const logAttempt = sendAttemptLog(deps.logger, deps.config);
  /** SQLite: the batch's statements run on the connection itself, synchronously. */
  const onConnection = worker.db !== undefined;
  const failover = new Failover({
    ctx,
    breakers: deps.breakers,
    logger: deps.logger,
    counters: deps.counters,
    onConnection,
  });
  /** A write of a settle or claim: the synchronous form on SQLite, else the async one through the Tx. */
  const both = (sync: () => void, viaTx: (tx: Tx) => Promise<unknown>): Apply =>
    onConnection ? sync : async (tx) => void (await viaTx(tx));

  function ratePerSecond(gw: GatewayWithSecrets): number {
    return gw.settings.rate_per_second ?? deps.config.dispatch.ratePerSecond[gw.kind];
  }

  /** The gateway's base_url setting, or undefined when it talks to the provider's real host. */
  function providerBase(gw: GatewayWithSecrets): string | undefined {
    return typeof gw.settings.base_url === 'string' ? gw.settings.base_url : undefined;
  }

  /** The message as its provider is given it, or why its stored content can never be sent. */
  function outbound(m: DispatchRow): OutboundMessage | { unsendable: string } {
    let content: MessageContent;
    try {
      content = JSON.parse(m.content) as MessageContent;
    } catch {
      return { unsendable: 'the stored content of this message is not valid JSON: it cannot be sent' };
    }
    if (content?.kind !== 'text' && content?.kind !== 'template' && content?.kind !== 'email')
      return {
        unsendable: `outbound ${String(content?.kind ?? 'unknown')} messages are not supported: it cannot be sent`,
      };
    return { id: m.id, channel: m.channel_type, to: m.to, from: m.from, content };
  }

  /** A message the claim found ready to go: its gateway, and the rate's short wait before the call. */
  interface Go {
    m: DispatchRow;
    /** What the provider is given. */
    msg: OutboundMessage;
    gw: GatewayWithSecrets;
    wait: number;
    /**
     * When that wait ends on msgd's clock (ctx.now()): counted from the turn, not from the
     * handler's start, which a slow commit of the claim delays by more for some than for others.
     */
    until: number;
    /** PostgreSQL: its slot on msgd's clock (ctx.now()), when the call goes at the soonest (LinePace). */
    goAt?: number;
    /** An earlier attempt's request may have left msgd without its outcome being recorded. */
    uncertain: boolean;
    /** Marked in flight by the claim, which counted on a free call slot for it. */
    marked: boolean;
  }
  // Decided in the claim transaction (onClaim), for the handler that runs right after it.
  const ready = new WeakMap<Job, Go>();

  // SQLite: one msgd, its lines in memory. PostgreSQL: the lines every instance shares, in the database.
  const lines = new GatewayLines({ shaper: deps.shaper, now: ctx.now });
  const shared = onConnection ? null : new SharedGatewayLines({ now: ctx.now });
  const pace = new LinePace(ctx.now);
  const slots = new CallSlots(deps.config.dispatch.connectionsPerOrigin);
  /** The connections a gateway's calls share with other gateways' (one origin), or its own. */
  const poolOf = (gw: GatewayWithSecrets): CallPool =>
    getAdapter(gw.kind).callPool?.(gw) ?? { key: `${gw.kind}:${gw.id}` };

  /**
   * What a claimed job does: go (its gateway and the rate's short wait), or a result settled in
   * the claim itself, so a message that must wait is never seen 'sending' and a crash cannot
   * leave it claimed with nothing in flight (which would flag it a possible duplicate).
   * `marked`: the row the claim marked 'sending'; a retry (already 'sending') is read here.
   */
  function decide(job: Job<DispatchPayload>, marked: DispatchRow | undefined): Go | JobResult {
    const m = marked ?? getMessageRow(ctx, job.payload.message_id);
    const place = lines.leave(job.id, m?.gateway_id ?? null);
    const d = decideRow(m);
    if ('held' in d) return failover.heldNow(d.m, d.gw, d.held, d.mayHaveLeft);
    if ('type' in d) return d;
    return turnOf(d, lines.turn(job.id, d.gw.id, ratePerSecond(d.gw), place));
  }

  /**
   * decide up to the gateway's line (PostgreSQL), its reads (the row, and a held gateway's
   * fallbacks) in the claim's transaction `tx`: the lines then give the turns of the whole claim.
   */
  async function decideIn(
    tx: Queryable,
    job: Job<DispatchPayload>,
    marked: DispatchRow | undefined,
    markedAt: number,
  ): Promise<Admitted | JobResult> {
    let m = marked;
    let readAt = markedAt;
    if (!m) {
      m = await getMessageRowIn(tx, job.payload.message_id);
      readAt = performance.now();
    }
    // The gateways were read before the claim (beforeClaim): a message accepted since on a
    // gateway made since names one the book may not hold yet, and is not to fail as removed.
    if (m?.gateway_id) await deps.gateways.getFor(m.gateway_id, readAt);
    const d = decideRow(m);
    return 'held' in d ? failover.heldIn(tx, d.m, d.gw, d.held, d.mayHaveLeft) : d;
  }

  /** A job the handler met undecided (PostgreSQL): decided alone, in a transaction of its own. */
  function decideAlone(job: Job<DispatchPayload>): Promise<Go | JobResult> {
    return ctx.store.transaction(async (tx) => {
      const places = await shared!.leave(tx, [job.id]);
      const d = await decideIn(tx, job, undefined, 0);
      if ('type' in d) return d;
      const [turn] = await shared!.turns(
        tx,
        [{ jobId: job.id, gatewayId: d.gw.id, rate: ratePerSecond(d.gw) }],
        places,
      );
      return turnOf(d, turn!);
    });
  }

  /** A message its gateway's circuit admitted: its turn on the gateway's rate says when it goes. */
  function turnOf(d: Admitted, turn: Turn): Go | JobResult {
    const { m, msg, gw } = d;
    if (!turn.go) failover.release(gw.id);
    // A longer wait (a backlog on a 1/s Twilio number can wait hours) holds a place in line.
    return turn.go
      ? {
          m,
          msg,
          gw,
          wait: turn.wait,
          until: ctx.now() + turn.wait,
          goAt: turn.localAt,
          uncertain: m.dispatch_in_flight === 1,
          marked: false,
        }
      : inLine(m, turn);
  }

  /** Admitted to its gateway: only the gateway's rate stands between it and its call. */
  interface Admitted {
    m: DispatchRow;
    msg: OutboundMessage;
    gw: GatewayWithSecrets;
  }

  /** A gateway whose circuit refused the call: what decide() reads next to settle the message. */
  interface Held {
    m: DispatchRow;
    gw: GatewayWithSecrets;
    held: NonNullable<ReturnType<Failover['admit']>>;
    mayHaveLeft: boolean;
  }

  function decideRow(m: DispatchRow | undefined): Admitted | JobResult | Held {
    // A scheduled message is released in the claim (onClaim); one met outside it is claimed again.
    if (m?.status === 'scheduled') return { type: 'snooze', afterMs: 0 };
    // Already settled by an earlier attempt whose job completion was lost: nothing to send.
    if (!m || !awaitsDispatch(m)) return { type: 'ok' };
    // A mark left by a crash: the last request may have reached the provider, so a message
    // failed now is flagged too (refunded, and charged again if a report proves it arrived).
    const mayHaveLeft = m.dispatch_in_flight === 1;
    if (!m.gateway_id) return failNow(m, 'no_gateway', 'the message has no gateway', mayHaveLeft);
    // A gateway changed by msgctl (disabled, new credentials, removed) is seen on the next turn.
    const gw = deps.gateways.get(m.gateway_id);
    if (!gw) return failNow(m, 'gateway_removed', 'the gateway of this message was removed', mayHaveLeft);
    // Content no provider can take fails now, as a provider's permanent refusal does (refunded):
    // retrying it would only fail the same way jobs.maxAttempts times.
    const msg = outbound(m);
    if ('unsendable' in msg) return failNow(m, 'unsendable_content', msg.unsendable, mayHaveLeft);
    if (gw.status !== 'active') {
      // Disabled is paused: the message keeps its place (a snooze spends no attempt) and says why.
      // It goes out once the gateway is enabled again (which wakes it); removing the gateway
      // fails and refunds it.
      const note = `gateway ${gw.name} is disabled: the message waits until it is enabled`;
      return {
        type: 'snooze',
        afterMs: disabledRecheckMs(ctx.now() - m.created_at, deps.config.jobs.backoffCapMs),
        apply: both(
          () => holdForDisabledGateway(ctx, m.id, note),
          (tx) => holdForDisabledGatewayIn(tx, ctx, m.id, note),
        ),
      };
    }
    // A gateway whose circuit is open takes no call: the message moves on to a fallback or waits.
    const held = failover.admit(gw);
    if (held) return { m, gw, held, mayHaveLeft };
    return { m, msg, gw };
  }

  /**
   * Waiting for the gateway's rate: nothing is in flight, so the partner sees 'queued'. A line
   * kept on the database's clock (PostgreSQL) says when the job falls due on it (runAt).
   */
  function inLine(m: DispatchRow, turn: Turn): JobResult {
    return {
      type: 'snooze',
      afterMs: turn.localAt === undefined ? turn.wait : Math.max(0, Math.ceil(turn.localAt - ctx.now())),
      runAt: turn.runAt,
      apply: both(
        () => requeueForRate(ctx, m.id),
        (tx) => requeueForRateIn(tx, ctx, m.id),
      ),
    };
  }

  /**
   * The messages waiting for a gateway (null: for every active gateway) are woken to take new
   * places in the order they were accepted (their run_at becomes their acceptance time): the
   * gateway was enabled again, disabled or removed, or given another rate, or msgd has just
   * started (the places were in memory). Its own transaction, before a claim. A place that
   * fell due before the wake (a slow start) is reset too: left at its snooze time it would go
   * behind later messages that were given their acceptance time.
   */
  function wakeLine(gatewayId: string | null, why: string, then = 'its waiting messages take new places in line') {
    const now = ctx.now();
    const woken = stmt(
      ctx.db.sqlite,
      `UPDATE jobs SET run_at = MIN(created_at, ?), updated_at = ? WHERE kind = ? AND state = 'available' AND run_at > MIN(created_at, ?)
         AND EXISTS (SELECT 1 FROM messages m LEFT JOIN gateways g ON g.id = m.gateway_id
           WHERE m.id = json_extract(jobs.payload, '$.message_id') AND m.status = 'queued'
             AND (? IS NULL OR m.gateway_id = ?) AND (? IS NOT NULL OR g.status = 'active'))`,
    ).run(now, now, DISPATCH_JOB, now, gatewayId, gatewayId, gatewayId).changes;
    if (woken > 0) deps.logger.info({ gatewayId, woken }, `${why}: ${then}`);
  }

  /** wakeLine in a store transaction (PostgreSQL's shared lines): the same statement, its JSON read and MIN in dialect form. */
  async function wakeLineIn(
    tx: Queryable,
    gatewayId: string,
    why: string,
    then = 'its waiting messages take new places in line',
  ): Promise<void> {
    const now = ctx.now();
    const since = sql`CASE WHEN created_at < ${now} THEN created_at ELSE ${now} END`;
    const { changes } = await tx.run(
      sql`UPDATE jobs SET run_at = ${since}, updated_at = ${now}
           WHERE kind = ${DISPATCH_JOB} AND state = 'available' AND run_at > ${since}
             AND EXISTS (SELECT 1 FROM messages m LEFT JOIN gateways g ON g.id = m.gateway_id
               WHERE m.id = ${jsonText(ctx.store.dialect, 'jobs.payload', 'message_id')} AND m.status = 'queued'
                 AND (CAST(${gatewayId} AS TEXT) IS NULL OR m.gateway_id = ${gatewayId}) AND (CAST(${gatewayId} AS TEXT) IS NOT NULL OR g.status = 'active'))`,
    );
    if (changes > 0) deps.logger.info({ gatewayId, woken: changes }, `${why}: ${then}`);
  }

  const lineGateways = () =>
    deps.gateways.all().map((gw) => ({
      id: gw.id,
      name: gw.name,
      active: gw.status === 'active',
      rate: ratePerSecond(gw),
    }));
  // Before each claim: a gateway enabled, disabled, removed or given another rate wakes its line.
  // On PostgreSQL the gateways are read through the store first, and the shared lines compared.
  worker.beforeClaim(
    shared === null
      ? () => lines.watch(deps.gateways.generation(), lineGateways, wakeLine)
      : async () => {
          await deps.gateways.load();
          await shared.watch(
            (fn) => ctx.store.transaction(fn),
            deps.gateways.generation(),
            lineGateways,
            wakeLineIn,
            ctx.now(),
          );
        },
  );

  /** A call slot for a message the claim did not count one for, and its mark in flight; a retry when that fails. */
  async function holdSlot(go: Go): Promise<JobResult | null> {
    const key = poolOf(go.gw);
    await slots.take(key);
    if (go.marked) return null;
    try {
      await worker.durably(
        both(
          () => markDispatchInFlight(ctx, go.m.id),
          (tx) => markDispatchInFlightIn(tx, go.m.id),
        ),
      );
      return null;
    } catch (e) {
      slots.give(key);
      failover.release(go.gw.id);
      return { type: 'retry', error: `not sent: ${e instanceof Error ? e.message : String(e)}` };
    }
  }

  const handler = async (job: Job<DispatchPayload>): Promise<JobResult> => {
    // Every claimed job has been decided in the claim (onClaim); this covers one that was not.
    const go = ready.get(job) ?? (onConnection ? decide(job, undefined) : await decideAlone(job));
    ready.delete(job);
    if ('type' in go) return go;
    const { m, msg, gw, uncertain } = go;
    const key = poolOf(gw);
    // The slot the claim counted on is taken now, in the turn of its commit, before any wait.
    const counted = go.marked && slots.tryTake(key);
    // One it could not count on is waited for from now, beside its wait in the gateway's line,
    // and marked in flight once held, as the claim marks the others: in line for a slot before
    // any message claimed after it, and with no write between its line's time and its call.
    const held = counted ? null : holdSlot(go);
    // PostgreSQL: at its slot on the shared line, in the line's order (src/jobs/line-pace.ts).
    if (go.goAt !== undefined) await pace.turn(gw.id, go.goAt, 1000 / ratePerSecond(gw));
    else if (go.wait > 0) {
      const left = go.until - ctx.now();
      if (left > 0) await sleep(left);
    }
    if (held) {
      const notSent = await held;
      if (notSent) return notSent;
    }

    // When the message was handed over: its sent_at. The provider stamps it later than this,
    // and Messenger's delivery and read watermarks are compared with that stamp.
    const startedAt = ctx.now();
    const timed = deps.counters?.providerCalls ?? null;
    const t0 = timed ? performance.now() : 0;
    const adapter = getAdapter(gw.kind);
    const runtime = { id: gw.id, kind: gw.kind, name: gw.name, settings: gw.settings, secrets: gw.secrets };
    let result: SendResult;
    try {
      result = await adapter.send(runtime, msg, {
        dispatcher: deps.dispatcher,
        timeoutMs: deps.config.dispatch.timeoutMs,
        publicUrl: deps.callbackBase(providerBase(gw)),
        now: ctx.now,
      });
    } catch (e: any) {
      result = { outcome: 'retry', message: e?.message ?? String(e) };
    } finally {
      slots.give(key);
    }
    if (timed) timed(gw.kind, OUTCOME_COUNTED[result.outcome], (performance.now() - t0) / 1000);
    if (result.outcome !== 'accepted') result = { ...result, message: redactSecrets(result.message, gw.secrets) };
    logAttempt(gw, m.id, job, result);
    deps.counters?.dispatch(
      gw.id,
      OUTCOME_COUNTED[result.outcome],
      result.outcome === 'accepted' ? undefined : result.code,
    );
    // Certainly not taken, or refused for a reason of this route: on to the next gateway, if any.
    const moved = onConnection
      ? failover.afterCall(m, gw, result, uncertain)
      : await failover.afterCallIn(m, gw, result, uncertain);
    if (moved) return moved;
    switch (result.outcome) {
      case 'accepted': {
        const r = result;
        const namedInReports = r.namedInReports === true;
        const change = {
          providerMessageId: r.providerMessageId,
          namedInReports,
          providerStatus: r.providerStatus ?? null,
          occurredAt: startedAt,
          uncertain,
        };
        const sent = {
          status: 'sent' as const,
          providerMessageId: r.providerMessageId,
          namedInReports,
          providerStatus: r.providerStatus ?? null,
          occurredAt: startedAt,
        };
        // What the provider module asks to have queued once it is recorded (the sandbox's report).
        const followUp = () => adapter.afterAccepted?.(runtime, r.providerMessageId, ctx.now());
        return {
          type: 'ok',
          apply: both(
            () => {
              const queueFollowUp = () => {
                const job = followUp();
                if (job) worker.queue.enqueue(job);
              };
              if (markSent(ctx, m, change)) return queueFollowUp();
              const fresh = getMessageState(ctx, m.id)!;
              if (uncertain) flagUncertain(ctx, m.id);
              const moved = applyStatus(ctx, fresh, sent);
              // The note an earlier retry left (429, timeout) is not this message's error: it was sent.
              if (moved.changed && fresh.error_code !== null) clearDispatchError(ctx, m.id);
              queueFollowUp();
            },
            async (tx) => {
              if (!(await markSentIn(tx, ctx, m, change))) {
                const fresh = (await getMessageStateIn(tx, m.id))!;
                if (uncertain) await flagUncertainIn(tx, ctx, m.id);
                const moved = await applyStatusIn(tx, ctx, fresh, sent);
                if (moved.changed && fresh.error_code !== null) await clearDispatchErrorIn(tx, m.id);
              }
              const job = followUp();
              if (job) await worker.queue.enqueue(tx, job);
            },
          ),
        };
      }
      case 'failed':
        return failNow(m, result.code, result.message, uncertain, result.suppress);
      case 'retry': {
        const note = `${result.code ? `${result.code}: ` : ''}${result.message}`;
        return {
          type: 'retry',
          // The provider's hint (Retry-After, or Meta's few seconds on a rate limit) is the
          // earliest retry, not the schedule: a limit that lasts gets the backoff's growing
          // delays, not twelve tries a few seconds apart and a failed message a minute later.
          minAfterMs: result.retryAfterMs,
          error: note,
          // A timeout or reset after the request left may have been accepted: the next attempt
          // could send it twice, and the message says so from now on. The note: only on a message
          // still waiting for its dispatch (a provider report may have settled it).
          apply: both(
            () => {
              if (uncertain || result.maybeDelivered) flagUncertain(ctx, m.id);
              noteDispatchRetry(ctx, m.id, result.code ?? 'retrying', result.message);
            },
            async (tx) => {
              if (uncertain || result.maybeDelivered) await flagUncertainIn(tx, ctx, m.id);
              await noteDispatchRetryIn(tx, ctx, m.id, result.code ?? 'retrying', result.message);
            },
          ),
        };
      }
    }
  };

  function failNow(
    m: DispatchRow,
    code: string,
    message: string,
    uncertain = false,
    suppress?: SuppressionSignal,
  ): JobResult {
    return {
      type: 'ok',
      // The next send to this recipient is refused before cost (the suppression signal).
      apply: both(
        () => {
          const fresh = getMessageState(ctx, m.id)!;
          if (uncertain) flagUncertain(ctx, m.id);
          applyStatus(ctx, fresh, { status: 'failed', errorCode: code, errorMessage: message, refundOnFailure: true });
          if (suppress) applySuppressionSignal(ctx, fresh, suppress);
        },
        async (tx) => {
          const fresh = (await getMessageStateIn(tx, m.id))!;
          if (uncertain) await flagUncertainIn(tx, ctx, m.id);
          await applyStatusIn(tx, ctx, fresh, {
            status: 'failed',
            errorCode: code,
            errorMessage: message,
            refundOnFailure: true,
          });
          if (suppress) await applySuppressionSignalIn(tx, ctx, fresh, suppress);
        },
      ),
    };
  }

  worker.register<DispatchPayload>(DISPATCH_JOB, handler, {
    // Mark the batch 'sending' in the claim transaction (no extra commit per message) and
    // decide each job there: the messages that go are kept for the handler; those that wait
    // (a paused gateway, the gateway's rate) or need no call are settled in the claim itself.
    onClaim: (jobs, tx) => (onConnection ? claimOnConnection(jobs) : claimIn(jobs, tx)),
    // Retries exhausted: the message is failed and the partner gets the money back. If an
    // attempt may have reached the provider (a timeout or reset after sending, or a crash
    // mid-call), the outcome is unknown and the message is flagged. A delivery report that finds
    // it later (Twilio's callback and SendGrid's custom_args name msgd's id) charges it again
    // (applyStatus); otherwise the operator checks with the provider (messages list --uncertain).
    onDead: (job, error, tx) => {
      if (!onConnection) return deadIn(tx, job, error);
      const m = getMessageState(ctx, job.payload.message_id);
      if (m && awaitsDispatch(m)) {
        const unknown = m.dispatch_uncertain === 1 || m.dispatch_in_flight === 1;
        if (unknown) flagUncertain(ctx, m.id);
        applyStatus(ctx, m, exhausted(job, error, unknown));
      }
    },
  });

  async function deadIn(tx: Tx, job: Job<DispatchPayload>, error: string): Promise<void> {
    const m = await getMessageStateIn(tx, job.payload.message_id);
    if (m && awaitsDispatch(m)) {
      const unknown = m.dispatch_uncertain === 1 || m.dispatch_in_flight === 1;
      if (unknown) await flagUncertainIn(tx, ctx, m.id);
      await applyStatusIn(tx, ctx, m, exhausted(job, error, unknown));
    }
  }

  function exhausted(job: Job<DispatchPayload>, error: string, unknown: boolean) {
    return {
      status: 'failed' as const,
      errorCode: unknown ? 'outcome_unknown' : 'retries_exhausted',
      errorMessage: unknown
        ? `gave up after ${job.attempts} attempts, and an attempt may have reached the provider (refunded; the operator can check with the provider): ${error}`
        : `gave up after ${job.attempts} attempts: ${error}`,
      refundOnFailure: true,
    };
  }

  /** The claim's decisions on the SQLite connection: no await per message. */
  function claimOnConnection(jobs: Job<DispatchPayload>[]): Map<Job<DispatchPayload>, JobResult> {
    const now = ctx.now();
    const settled = new Map<Job<DispatchPayload>, JobResult>();
    const taking = new Map<string, number>();
    for (const j of jobs) {
      let marked = claimForDispatch(ctx, j.payload.message_id, now);
      // Not queued: a retry ('sending'), a settled message, or a scheduled one now due, which
      // is released (checked again, src/core/scheduled.ts) and then goes as any other.
      if (!marked && releaseScheduled(ctx, j.payload.message_id))
        marked = claimForDispatch(ctx, j.payload.message_id, now);
      const d = decide(j, marked);
      if ('type' in d) settled.set(j, d);
      else if (takeSlot(j, d, taking)) markDispatchInFlight(ctx, d.m.id);
    }
    return settled;
  }

  /**
   * The claim's decisions through its Tx (PostgreSQL): each job up to its gateway's line, then
   * the turns of every job that goes to a gateway, given by the shared lines at once. The
   * batch's queued messages are marked 'sending' in one statement, and those that go with a
   * free call slot in flight in another: two round trips a batch, not two a message.
   */
  async function claimIn(jobs: Job<DispatchPayload>[], tx: Tx): Promise<Map<Job<DispatchPayload>, JobResult>> {
    const now = ctx.now();
    const dialect = ctx.store.dialect;
    const settled = new Map<Job<DispatchPayload>, JobResult>();
    const taking = new Map<string, number>();
    const places = await shared!.leave(
      tx,
      jobs.map((j) => j.id),
    );
    const admitted: [Job<DispatchPayload>, Admitted][] = [];
    const claimed = await claimManyForDispatchIn(
      tx,
      dialect,
      jobs.map((j) => j.payload.message_id),
      now,
    );
    const claimedAt = performance.now();
    const inFlight: string[] = [];
    for (const j of jobs) {
      const id = j.payload.message_id;
      // A row is the claim's for the first job naming it; another job for it reads it as a retry does.
      let marked = claimed.get(id);
      let markedAt = claimedAt;
      claimed.delete(id);
      if (!marked && (await releaseScheduledIn(tx, ctx, id))) {
        marked = await claimForDispatchIn(tx, id, now);
        markedAt = performance.now();
      }
      const d = await decideIn(tx, j, marked, markedAt);
      if ('type' in d) settled.set(j, d);
      else admitted.push([j, d]);
    }
    const turns = await shared!.turns(
      tx,
      admitted.map(([j, d]) => ({ jobId: j.id, gatewayId: d.gw.id, rate: ratePerSecond(d.gw) })),
      places,
    );
    for (let i = 0; i < admitted.length; i++) {
      const [j, a] = admitted[i]!;
      const d = turnOf(a, turns[i]!);
      if ('type' in d) {
        settled.set(j, d);
        continue;
      }
      if (takeSlot(j, d, taking)) inFlight.push(d.m.id);
    }
    await markManyInFlightIn(tx, dialect, inFlight);
    return settled;
  }

  /**
   * Keeps a message that goes for the handler; true when a call slot is free for it right after
   * the claim's commit (`taking`: the slots this claim's calls take), so the claim marks it in flight.
   */
  function takeSlot(job: Job<DispatchPayload>, d: Go, taking: Map<string, number>): boolean {
    ready.set(job, d);
    const pool = poolOf(d.gw);
    const n = taking.get(pool.key) ?? 0;
    if (slots.free(pool) <= n) return false;
    taking.set(pool.key, n + 1);
    d.marked = true;
    return true;
  }
}
