import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Db } from '../db/open.js';
import type { Queryable, Tx } from '../db/query.js';
import { FailureLog } from '../lib/failure-log.js';
import type { Job, JobQueue } from './queue.js';
import type { JobLogger, WorkerCounters, WorkerOptions } from './worker-options.js';
import { checkResult, errorMessage, type JobResult, type KindHooks, type Outcome } from './settle.js';
import type { Alarm, Background, ClaimScope, Life, Loop } from './worker-state.js';
import {
  settleAndClaim,
  type BatchEnv,
  type BatchOut,
  type Finished,
  type Rider,
  type Running,
} from './worker-batch.js';

export type { Apply, JobResult, KindHooks } from './settle.js';
export type { JobLogger, WorkerCounters, WorkerOptions } from './worker-options.js';

export type JobHandler<P = any> = (job: Job<P>) => Promise<JobResult> | JobResult;

const BATCH_RETRY_MS = 250;
/** A busy worker looks at every one of its kinds at least this often (see claimJobs). */
const EVERY_KIND_MS = 100;
const noop = () => {};
/** SQLite's code (SQLITE_FULL, SQLITE_IOERR_WRITE, SQLITE_BUSY), else the error's name. */
const errorCode = (err: unknown) =>
  String((err as { code?: unknown } | null)?.code ?? (err instanceof Error ? err.name : 'Error'));
const silent: JobLogger = { info: noop, warn: noop, error: noop };

export class Worker {
  readonly id: string;
  readonly counters: WorkerCounters = {
    claimed: 0,
    completed: 0,
    retried: 0,
    snoozed: 0,
    dead: 0,
    lost: 0,
    released: 0,
    reclaimed: 0,
    batches: 0,
  };
  /** The SQLite database, when the queue is over one (undefined on PostgreSQL). */
  readonly db: Db | undefined;
  readonly queue: JobQueue;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly logger: JobLogger;
  private readonly now: () => number;
  private readonly lifelineIntervalMs: number;
  private readonly maxSleepMs: number;
  private readonly handlers = new Map<string, { handler: JobHandler; hooks: KindHooks }>();
  private kinds: string[] = [];
  private readonly env: BatchEnv;

  private life: Life = 'stopped';
  private loop: Loop = 'claiming';
  private scope: ClaimScope = { of: 'every' };
  private alarm: Alarm | null = null;
  private background: Background | null = null;
  /** A turn is asked for and has not yet begun its transaction: many finishes, one turn. */
  private tickScheduled = false;
  /** Turns are running (runTicks); a turn asked for meanwhile runs after the current one. */
  private ticking = false;
  private readonly inflight = new Map<number, Running>();
  private finished: Finished[] = [];
  private riders: Rider[] = [];
  private readonly beforeClaimHooks: (() => void)[] = [];
  private waiters: (() => void)[] = [];
  private stopping$: Promise<void> | null = null;
  /**
   * A batch that keeps failing (a full disk) is retried on every finish and wake, dozens of
   * times a second: the first failure is logged with its stack, then one line per interval
   * with the count, and one when a batch commits again.
   */
  private readonly batchFailures: FailureLog;
  /**
   * A turn that throws outside its batch transaction (a fault of the worker's own) is tried
   * again every BATCH_RETRY_MS: logged as batchFailures are, its first failure with the stack,
   * then a count per interval, and one line when a turn runs through again.
   */
  private readonly turnFailures: FailureLog;
  /**
   * A beforeClaim hook that keeps failing (one reading through a store that is down) fails on
   * every turn: logged the same way, and the claim goes on.
   */
  private readonly hookFailures: FailureLog;

  constructor(opts: WorkerOptions) {
    if (!(opts.concurrency >= 1)) throw new Error('concurrency must be at least 1');
    if (!(opts.leaseMs > 0)) throw new Error('leaseMs must be positive');
    this.db = opts.db ?? opts.queue.db;
    this.queue = opts.queue;
    this.concurrency = Math.floor(opts.concurrency);
    this.leaseMs = opts.leaseMs;
    this.logger = opts.logger ?? silent;
    this.now = opts.now ?? Date.now;
    this.id = opts.workerId ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.lifelineIntervalMs = opts.lifelineIntervalMs ?? 30_000;
    this.maxSleepMs = opts.maxSleepMs ?? 1000;
    this.batchFailures = new FailureLog(this.logger, {
      what: 'job batch transactions',
      level: 'error',
      intervalMs: opts.failureLogIntervalMs,
    });
    this.turnFailures = new FailureLog(this.logger, {
      what: 'worker turns',
      level: 'error',
      intervalMs: opts.failureLogIntervalMs,
    });
    this.hookFailures = new FailureLog(this.logger, {
      what: 'beforeClaim hooks',
      level: 'error',
      intervalMs: opts.failureLogIntervalMs,
    });
    this.env = {
      ctx: {
        workerId: this.id,
        queue: this.queue,
        backoff: opts.backoff ?? { baseMs: 1000, capMs: 15 * 60_000 },
        hooks: (kind) => this.handlers.get(kind)?.hooks,
        log: (level, obj, msg) => this.logger[level]({ workerId: this.id, ...obj }, msg),
      },
      // A SQLite queue's batch runs its statements on the connection, without an await.
      conn: this.queue.db ? this.queue.syncConn() : undefined,
      claim: (tx, want, now) => this.claimJobs(tx, want, now),
      logger: this.logger,
    };
  }

  /** The job kinds with a handler, sorted. */
  registeredKinds(): readonly string[] {
    return this.kinds;
  }

  register<P = any>(kind: string, handler: JobHandler<P>, hooks: KindHooks<P> = {}): this {
    if (this.handlers.has(kind)) throw new Error(`a handler for job kind "${kind}" is already registered`);
    this.handlers.set(kind, { handler, hooks });
    this.kinds = [...this.handlers.keys()].sort();
    if (this.life === 'running') this.wake();
    return this;
  }

  /**
   * fn runs before each claim, outside its transaction (at least every maxSleepMs while the
   * worker runs, also when idle): for work that decides what the claim will find, in its own
   * transaction. It may return a promise (a hook reading through the store): the claim waits
   * for it. A throw or rejection is logged (as a spell while it goes on: hookFailures) and does
   * not stop the claim.
   */
  beforeClaim(fn: () => void | Promise<void>): this {
    this.beforeClaimHooks.push(fn);
    return this;
  }

  /** The hooks, one after another; a promise only when one of them returned one (awaited in turn). */
  private runBeforeClaim(): Promise<void> | undefined {
    let failed = false;
    for (let i = 0; i < this.beforeClaimHooks.length; i++) {
      try {
        const r: unknown = this.beforeClaimHooks[i]!();
        if (r instanceof Promise) return this.finishBeforeClaim(r, i + 1, failed);
      } catch (err) {
        failed = true;
        this.hookFailed(err);
      }
    }
    if (!failed) this.hookFailures.success('hooks', { workerId: this.id });
    return undefined;
  }

  private async finishBeforeClaim(pending: Promise<void>, from: number, failedBefore: boolean): Promise<void> {
    let failed = failedBefore;
    try {
      await pending;
    } catch (err) {
      failed = true;
      this.hookFailed(err);
    }
    for (let i = from; i < this.beforeClaimHooks.length; i++) {
      try {
        await this.beforeClaimHooks[i]!();
      } catch (err) {
        failed = true;
        this.hookFailed(err);
      }
    }
    if (!failed) this.hookFailures.success('hooks', { workerId: this.id });
  }

  private hookFailed(err: unknown): void {
    this.hookFailures.failure('hooks', errorCode(err), { workerId: this.id, err }, 'beforeClaim hook threw');
  }

  /**
   * For a running job: `write` runs in the next batch transaction (its own savepoint, given its
   * Tx; it may return a promise), and the
   * promise resolves once that transaction has committed, so what it wrote survives a crash
   * from then on. Many jobs' writes in one turn share one commit, like their settles. Rejects
   * with what `write` threw, and once the worker has stopped (nothing commits any more).
   */
  durably(write: (tx: Tx) => void | Promise<void>): Promise<void> {
    if (this.life === 'stopped') return Promise.reject(new Error('the worker has stopped'));
    return new Promise<void>((resolve, reject) => {
      this.riders.push({ write, resolve, reject });
      this.scheduleTick();
    });
  }

  get inFlight(): number {
    return this.inflight.size;
  }

  start(): void {
    if (this.life === 'stopping') throw new Error('worker is stopping');
    if (this.life === 'running') return;
    if (this.kinds.length === 0) throw new Error('register a job handler before start()');
    this.life = 'running';
    this.loop = 'claiming';
    const unsubscribe = this.queue.onEnqueue(this.onEnqueue);
    this.runLifeline();
    this.background = {
      lifeline: setInterval(this.runLifeline, this.lifelineIntervalMs),
      heartbeat: setInterval(this.heartbeat, Math.min(Math.max(this.leaseMs / 4, 5), 60_000)),
      unsubscribe,
    };
    this.scheduleTick();
  }

  /**
   * Stop claiming, let running jobs finish and commit, then after timeoutMs hand whatever still
   * runs back to the queue (available, attempt not spent); their late results are dropped.
   */
  stop(opts: { timeoutMs?: number } = {}): Promise<void> {
    if (this.life === 'stopped') return Promise.resolve();
    this.stopping$ ??= this.shutdown(opts.timeoutMs ?? 30_000).finally(() => (this.stopping$ = null));
    return this.stopping$;
  }

  /**
   * For tests and one-off runs: resolve once nothing of ours is runnable now and nothing is in
   * flight; with untilEmpty, once no job of ours waits at all (future run_at included).
   * Starts the worker for the duration if it was not running.
   */
  async drain(opts: { untilEmpty?: boolean; maxWaitMs?: number } = {}): Promise<void> {
    const maxWaitMs = opts.maxWaitMs ?? 30_000;
    const wasRunning = this.life !== 'stopped';
    if (!wasRunning) this.start();
    const deadline = Date.now() + maxWaitMs;
    try {
      for (;;) {
        if (this.quiet()) {
          const done = opts.untilEmpty
            ? !(await this.queue.hasPending(this.kinds))
            : !(await this.queue.hasRunnable(this.now(), this.kinds));
          if (done) return;
          this.wake();
        }
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`drain: jobs still pending after ${maxWaitMs} ms`);
        await this.nextProgress(Math.min(left, 100));
      }
    } finally {
      if (!wasRunning) await this.stop();
    }
  }

  // The loop. Everything that finished since the last turn is settled, and the freed capacity
  // claimed, in ONE transaction: one fsync per turn instead of one per job (group commit).

  private scheduleTick() {
    if (this.tickScheduled) return;
    this.tickScheduled = true;
    if (this.ticking) return;
    this.ticking = true;
    // After the caller's code (never inside a transaction of its own); the store begins the
    // turn's transaction in an event-loop turn of its own, and everything finished until then
    // joins it.
    queueMicrotask(() => void this.runTicks());
  }

  /** everyKind: the next claim looks at every kind, not only those that filled the last one. */
  private wake(everyKind = true) {
    this.loop = 'claiming';
    if (everyKind) this.scope = { of: 'every' };
    this.scheduleTick();
  }

  /** Turns one after another, while one is asked for. */
  private async runTicks(): Promise<void> {
    try {
      while (this.tickScheduled) await this.turn();
      this.turnFailures.success('turn', { workerId: this.id });
    } catch (err) {
      this.turnFailures.failure('turn', errorCode(err), { workerId: this.id, err }, 'worker turn failed; retrying');
      // A turn asked for while this one ran (a job finished) is taken up after a pause: left
      // asked for, it would never run, as scheduleTick starts no turn while one is pending.
      this.tickScheduled = false;
      if (this.life !== 'stopped') this.armWake(this.now() + BATCH_RETRY_MS);
    } finally {
      this.ticking = false;
      // Once not ticking: a drain woken by the turn's end sees the worker quiet.
      this.progress();
    }
  }

  /** The free capacity a turn claims. */
  private wanted(): number {
    return this.loop === 'claiming' && this.life === 'running' ? this.concurrency - this.inflight.size : 0;
  }

  private async turn(): Promise<void> {
    if (this.life === 'stopped' || (this.finished.length === 0 && this.riders.length === 0 && this.wanted() <= 0)) {
      this.tickScheduled = false;
      return this.progress();
    }
    if (this.wanted() > 0) {
      const pending = this.runBeforeClaim();
      if (pending) await pending;
    }
    let taken: { finished: Finished[]; riders: Rider[] } = { finished: [], riders: [] };
    let out: BatchOut & { now: number; want: number };
    try {
      // One store transaction per turn (BEGIN IMMEDIATE on SQLite: the write lock up front, so a
      // busy database waits in busy_timeout instead of failing a read-then-write upgrade).
      out = await this.queue.store.transaction(async (tx) => {
        // Taken once the transaction has begun: what finished meanwhile joins this batch, and
        // the times onClaim hands out (a gateway line's places) count from now. PostgreSQL runs
        // this function again after a deadlock or a serialization failure (everything of the
        // first run rolled back): what that run took is taken again, with what finished since.
        this.tickScheduled = false;
        taken = { finished: taken.finished.concat(this.finished), riders: taken.riders.concat(this.riders) };
        this.finished = [];
        this.riders = [];
        const now = this.now();
        const want = this.wanted();
        const batch = await settleAndClaim(tx, this.env, taken.finished, want, now, taken.riders);
        return { ...batch, now, want };
      });
    } catch (err) {
      // Whole batch rolled back (database busy past busy_timeout, disk full): try it again.
      this.tickScheduled = false;
      this.finished = taken.finished.concat(this.finished);
      this.riders = taken.riders.concat(this.riders);
      this.batchFailures.failure(
        'batch',
        errorCode(err),
        { workerId: this.id, err },
        'job batch transaction failed; retrying',
      );
      this.armWake(this.now() + BATCH_RETRY_MS);
      return this.progress();
    }
    const { now, want } = out;
    const riders = taken.riders;
    this.batchFailures.success('batch', { workerId: this.id });
    this.counters.batches++;
    for (let i = 0; i < riders.length; i++) {
      const err = out.riderErrors[i];
      if (err === undefined) riders[i].resolve();
      else riders[i].reject(err);
    }
    for (const o of out.outcomes) this.count(o, now);
    this.counters.claimed += out.claimed;
    for (const run of out.started) this.launch(run);
    if (want > 0 && out.claimed < want) {
      this.loop = 'sleeping';
      await this.sleepUntilNext(now);
    } else if (out.started.length < out.claimed) {
      // Claimed jobs that did not start (settled in the claim by onClaim, dead-lettered, or
      // retried after onClaim threw) left their slots free, and nothing running will finish to
      // fill them: claim again now.
      this.wake(false);
    }
    this.progress();
  }

  // A claim over every kind costs index seeks per kind. So while every claim comes back full,
  // the worker claims from the kinds that filled the last claim over every kind, and looks at
  // every kind again: after EVERY_KIND_MS (a monotonic clock, so neither a test's frozen clock
  // nor a system clock stepped back can stretch it); as soon as those kinds run short; when a
  // job of another kind is enqueued in this process or falls due on a timer; and after a retry,
  // a reclaim or a new handler.
  private async claimJobs(tx: Queryable, want: number, now: number): Promise<Job[]> {
    const scope = this.scope;
    const wall = performance.now();
    const all = { leaseMs: this.leaseMs, kinds: this.kinds };
    if (scope.of === 'hot' && wall < scope.until) {
      const jobs = await this.queue.claimIn(tx, this.id, want, now, { leaseMs: this.leaseMs, kinds: scope.kinds });
      if (jobs.length === want) return jobs;
      this.scope = { of: 'every' };
      return jobs.concat(await this.queue.claimIn(tx, this.id, want - jobs.length, now, all));
    }
    const jobs = await this.queue.claimIn(tx, this.id, want, now, all);
    if (jobs.length < want) {
      this.scope = { of: 'every' };
    } else {
      const set = new Set(jobs.map((j) => j.kind));
      this.scope = { of: 'hot', kinds: [...set].sort(), set, until: wall + EVERY_KIND_MS };
    }
    return jobs;
  }

  private launch(run: Running) {
    this.inflight.set(run.job.id, run);
    const { handler } = this.handlers.get(run.job.kind)!;
    let p: Promise<JobResult> | JobResult;
    try {
      p = handler(run.job);
    } catch (err) {
      p = Promise.reject(err);
    }
    Promise.resolve(p).then(
      (r) => this.finish(run, checkResult(r)),
      (err) => this.finish(run, { type: 'retry', error: errorMessage(err) }),
    );
  }

  private finish(run: Running, result: JobResult) {
    if (run.released || this.inflight.get(run.job.id) !== run) return;
    this.inflight.delete(run.job.id);
    this.finished.push({ run, result });
    this.scheduleTick();
  }

  private count(o: Outcome, now: number) {
    switch (o.kind) {
      case 'completed':
        this.counters.completed++;
        return;
      case 'dead':
        this.counters.dead++;
        return;
      case 'lost':
        this.counters.lost++;
        return;
      case 'retried':
      case 'snoozed':
        if (o.kind === 'retried') this.counters.retried++;
        else this.counters.snoozed++;
        if (o.runAt <= now) this.wake();
        else this.armWake(o.runAt);
    }
  }

  // Sleeping: exactly until the next known run_at, never longer than maxSleepMs.

  private async sleepUntilNext(now: number) {
    // An alarm armed from the queue's answer covers what we know: local enqueues, retries and
    // snoozes only pull it earlier. One armed only for a job just put back may be later than
    // others already waiting (it was armed after the alarm for those had fired): ask the queue.
    if (this.alarm?.fromQueue) return;
    let next: number | null;
    try {
      next = await this.queue.nextRunAt(this.kinds);
    } catch (err) {
      // The database did not answer (down, or past its query timeout): look again after the
      // longest sleep, as if nothing were known. Without an alarm only a wake-up ends the sleep.
      this.logger.warn({ workerId: this.id, err }, 'reading the next run_at failed; looking again shortly');
      if (this.life !== 'stopped') this.armWake(now + this.maxSleepMs);
      return;
    }
    if (this.alarm?.fromQueue || this.life === 'stopped') return;
    let at = now + this.maxSleepMs;
    // next <= now: another connection committed a job after our claim; look again shortly.
    if (next !== null) at = Math.min(at, next > now ? next : now + 5);
    this.armWake(at);
    this.alarm!.fromQueue = true;
  }

  private armWake(at: number) {
    if (this.alarm && at >= this.alarm.at) return;
    if (this.alarm) clearTimeout(this.alarm.timer);
    // +1: timers may fire a hair before Date.now() reaches the target.
    const timer = setTimeout(this.onWakeTimer, Math.max(0, at - this.now()) + 1);
    this.alarm = { timer, at, fromQueue: false };
  }

  private clearWake() {
    if (this.alarm) clearTimeout(this.alarm.timer);
    this.alarm = null;
  }

  private readonly onWakeTimer = () => {
    this.alarm = null;
    this.wake();
  };

  // Only jobs of this worker's kinds wake it: another worker's enqueues are not its business.
  private readonly onEnqueue = (earliestByKind: ReadonlyMap<string, number>) => {
    if (this.life !== 'running') return;
    const now = this.now();
    let earliestRunAt = Infinity;
    let otherKindDue = false;
    for (const [kind, at] of earliestByKind) {
      if (!this.handlers.has(kind)) continue;
      if (at < earliestRunAt) earliestRunAt = at;
      if (at <= now && !(this.scope.of === 'hot' && this.scope.set.has(kind))) otherKindDue = true;
    }
    if (earliestRunAt === Infinity) return;
    if (earliestRunAt <= now) this.wake(otherKindDue);
    else this.armWake(earliestRunAt);
  };

  private readonly runLifeline = () => {
    this.lifelineOnce().catch((err: unknown) => this.logger.error({ workerId: this.id, err }, 'lifeline failed'));
  };

  private async lifelineOnce(): Promise<void> {
    try {
      // This process's running jobs are alive whatever their leases say (a pause longer than
      // the lease, a heartbeat that failed): they are renewed first, in the same transaction, so
      // only jobs that no handler here runs are taken back. One of ours taken back would run
      // twice at once, and a provider call waiting for a free connection could go out twice.
      // Finished ones whose results wait for a turn to commit them are renewed too. Every one
      // is, not only those past half the lease by this process's count: the store's may differ
      // (PostgreSQL's clock ahead of this one's).
      const now = this.now();
      const [renewed, n] = await this.queue.store.transaction(async (tx) => {
        const r = await this.renewLeases(tx, now, true);
        return [r, await this.queue.lifeline(now, tx)] as const;
      });
      renewed();
      if (n === 0) return;
      this.counters.reclaimed += n;
      this.logger.warn({ workerId: this.id, count: n }, 'lifeline reclaimed jobs whose lease expired');
      if (this.life === 'running') this.wake();
    } catch (err) {
      this.logger.error({ workerId: this.id, err }, 'lifeline failed');
    }
  }

  // Leases: renew what has run past half its lease, so a slow but live handler is never
  // reclaimed. A stalled process stops renewing, which is the point.
  private readonly heartbeat = () => {
    if (this.inflight.size === 0 && this.finished.length === 0) return;
    this.queue.store
      .transaction((tx) => this.renewLeases(tx, this.now()))
      .then(
        (renewed) => renewed(),
        (err: unknown) => this.logger.error({ workerId: this.id, err }, 'lease renewal failed'),
      );
  };

  /**
   * In the caller's transaction: renews what has run past half its lease (`every`: all it
   * holds). Returns what to note once that transaction has committed.
   */
  private async renewLeases(tx: Queryable, now: number, every = false): Promise<() => void> {
    const held = [...this.inflight.values(), ...this.finished.map((f) => f.run)];
    // In id order: the heartbeat and the lifeline renew at once without waiting on each other crosswise.
    const due = (every ? held : held.filter((r) => r.lockedUntil - now < this.leaseMs / 2)).sort(
      (a, b) => a.job.id - b.job.id,
    );
    const until = now + this.leaseMs;
    const renewed: Running[] = [];
    for (const r of due) if (await this.queue.extendLease(r.job.id, r.lease, until, tx)) renewed.push(r);
    return () => {
      for (const r of renewed) r.lockedUntil = until;
    };
  }

  // Shutdown and drain support.

  private quiet(): boolean {
    return this.inflight.size === 0 && this.finished.length === 0 && !this.tickScheduled && !this.ticking;
  }

  private progress() {
    const w = this.waiters;
    this.waiters = [];
    for (const resolve of w) resolve();
  }

  private nextProgress(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  private async shutdown(timeoutMs: number) {
    this.life = 'stopping';
    const background = this.background!;
    this.background = null;
    background.unsubscribe();
    this.clearWake();
    clearInterval(background.lifeline);
    // Wall-clock wait even under an injected clock: this is real time the caller is waiting.
    const deadline = Date.now() + timeoutMs;
    while (!this.quiet() && Date.now() < deadline) await this.nextProgress(deadline - Date.now());
    if (this.inflight.size > 0) await this.releaseInflight();
    while (this.ticking) await this.nextProgress(50);
    if (this.finished.length > 0) {
      this.tickScheduled = true;
      this.ticking = true;
      await this.runTicks();
    }
    this.clearWake();
    clearInterval(background.heartbeat);
    this.life = 'stopped';
    // Writes asked for by jobs handed back above: nothing commits them now.
    for (const r of this.riders.splice(0)) r.reject(new Error('the worker has stopped'));
    this.progress();
  }

  private async releaseInflight() {
    const runs = [...this.inflight.values()];
    const now = this.now();
    let n = 0;
    try {
      n = await this.queue.store.transaction(async (tx) => {
        let released = 0;
        for (const r of runs) if (await this.queue.release(r.job.id, { lease: r.lease, now }, tx)) released++;
        return released;
      });
    } catch (err) {
      this.logger.error({ workerId: this.id, err }, 'releasing running jobs failed; the lifeline will reclaim them');
    }
    for (const r of runs) r.released = true;
    this.inflight.clear();
    this.counters.released += n;
    this.logger.warn(
      { workerId: this.id, count: n },
      'stop timed out; jobs still running were handed back to the queue',
    );
  }
}
