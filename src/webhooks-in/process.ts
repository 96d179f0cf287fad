import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import {
  applyProviderEvents,
  applyProviderEventsIn,
  type ApplyOptions,
  type ApplyOutcome,
  type ProviderEvent,
} from '../core/inbound.js';
import {
  expireWebhookLog,
  finishWebhookLog,
  finishWebhookLogIn,
  getWebhookLog,
  noteWebhookProgress,
  noteWebhookProgressIn,
  type Processing,
  type WebhookLogRow,
  webhookLogRowsIn,
} from '../core/webhook-log.js';
import { inSavepoint, type Tx } from '../db/query.js';
import { postSandboxReport, SANDBOX_REPORT_JOB, type SandboxReportPayload } from '../providers/sandbox/report.js';
import { parseStoredWebhook, type WebhookHandler } from '../providers/webhooks.js';
import type { Logger } from 'pino';
import { FailureLog } from '../lib/failure-log.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';
import type { Job, JobQueue } from '../queue/queue.js';
import type { Worker } from '../queue/worker.js';
import { errorMessage, type JobResult } from '../queue/settle.js';
import type { GatewayBook } from '../jobs/gateway-book.js';
import { WEBHOOK_PROCESS_JOB, enqueueWebhookProcessing, processingJob } from './intake.js';

// The jobs behind the inbound webhook endpoints: processing stored webhooks (dedupe, route,
// apply) and the sandbox's delivery report. Processing applies inside the worker's batch
// transaction (apply), so thousands of webhooks share a commit.
//
// On both stores, as dispatch (src/jobs/dispatch.ts): on SQLite the apply runs the synchronous
// core (applyProviderEvents) on the connection, each webhook in a savepoint, the whole batch in
// its one turn with no await per statement (the webhook intake's hot path); through a store
// (PostgreSQL) it awaits the async core (applyProviderEventsIn) on the batch's Tx, each webhook
// in a savepoint of that Tx (inSavepoint). The gateways are read through the store first
// (GatewayBook.load()), so the apply reads them from memory.

/**
 * A status can beat the commit that records its message's provider id: the provider calls
 * back before its answer to our send reaches us, and that answer may take up to
 * dispatch.timeoutMs. Such a webhook is looked at again after doubling delays from 200 ms
 * until the waits cover that timeout and 2 s more (25 s in all at the default 15 s), before
 * its event is called unroutable.
 */
export function waitForMessageMs(dispatchTimeoutMs: number): number[] {
  const waits: number[] = [];
  for (let d = 200, total = 0; total < dispatchTimeoutMs + 2000; d *= 2) {
    waits.push(d);
    total += d;
  }
  return waits;
}

interface ProcessPayload {
  webhook_ids: string[];
  /** Follow-up number while waiting for a message to appear. */
  round?: number;
}

export function outcomeOf(o: ApplyOutcome, progressedBefore: boolean): [Processing, string | null] {
  const notes = [...o.unroutable, ...o.ignored];
  const error = notes.length ? notes.join('; ') : null;
  // Events applied by an earlier round are duplicates now; the webhook still did its work.
  if (o.processed > 0 || (progressedBefore && o.duplicates > 0)) return ['processed', error];
  if (o.unroutable.length) return ['unroutable', error];
  if (o.duplicates > 0) return ['duplicate', error];
  return ['ignored', error ?? 'no events in the payload'];
}

export interface WebhooksInDeps {
  ctx: CoreCtx;
  config: Config;
  queue: JobQueue;
  gateways: GatewayBook;
  dispatcher: Dispatcher;
  /** msgd's base URL for provider callbacks (see Runtime.callbackBase). */
  callbackBase: () => string | null;
  /** Where msgd listens, once it does. */
  selfUrl: () => string | null;
  logger: Logger;
  /** Counts webhooks found unroutable (the console's overview, metrics). */
  counters?: Counters;
}

export function registerWebhooksIn(worker: Worker, deps: WebhooksInDeps): void {
  const book = deps.gateways;
  /** SQLite: the batch's statements run on the connection itself, synchronously. */
  const db = worker.db;
  if (db) {
    // Built once: better-sqlite3's transaction() wrapper is costly to create per call.
    const savepoint = db.sqlite.transaction((fn: () => void) => fn());
    worker.register<ProcessPayload>(WEBHOOK_PROCESS_JOB, (job) => processWebhooks(deps, book, savepoint, job), {
      onDead: (job, error) => {
        for (const id of job.payload.webhook_ids) {
          if (getWebhookLog(deps.ctx, id)?.processing === 'pending') finishWebhookLog(deps.ctx, id, 'error', error);
        }
      },
    });
  } else {
    worker.register<ProcessPayload>(WEBHOOK_PROCESS_JOB, (job) => processWebhooksIn(deps, book, job), {
      onDead: async (job, error, tx) => {
        for (const row of await webhookLogRowsIn(tx, deps.ctx.store.dialect, job.payload.webhook_ids)) {
          if (row.processing === 'pending') await finishWebhookLogIn(tx, deps.ctx, row.id, 'error', error);
        }
      },
    });
  }
  worker.register<SandboxReportPayload>(SANDBOX_REPORT_JOB, (job) => sandboxReport(deps, book, job));
}

interface Parsed {
  row: WebhookLogRow;
  handler: WebhookHandler;
  events: ProviderEvent[];
}

/** The stored request back into events; a string says why it cannot be. */
function parseStored(row: WebhookLogRow): Parsed | string {
  const p = parseStoredWebhook(row);
  if (!('fault' in p)) return { row, ...p };
  if (p.fault === 'no_handler') return `no webhook handler for provider ${row.provider}`;
  if (p.fault === 'no_parse') return `the stored body no longer parses as a ${row.provider} webhook`;
  return errorMessage(p.error);
}

type Work = Parsed | { row: WebhookLogRow; error: string };

/** The job's rows still pending (one gone to retention, or settled by an earlier run whose completion was lost, is not), parsed. */
function workOf(rows: (WebhookLogRow | undefined)[]): Work[] {
  const work: Work[] = [];
  for (const row of rows) {
    if (!row || row.processing !== 'pending') continue;
    const p = parseStored(row);
    work.push(typeof p === 'string' ? { row, error: p } : p);
  }
  return work;
}

/** Which look this is, and what applying a webhook of the job is given. */
function roundOf(deps: WebhooksInDeps, job: Job<ProcessPayload>) {
  const round = job.payload.round ?? 0;
  const waits = waitForMessageMs(deps.config.dispatch.timeoutMs);
  return {
    round,
    waits,
    final: round >= waits.length,
    refundOnFailure: deps.config.billing.refundOnProviderFailure === 'always',
  };
}

function applyOptions(book: GatewayBook, w: Parsed, r: ReturnType<typeof roundOf>): ApplyOptions {
  const signer = w.row.gateway_id ? book.get(w.row.gateway_id) : null;
  return {
    trusted: (id) => book.trusts(w.handler, signer, id),
    refundOnFailure: r.refundOnFailure,
    final: r.final,
  };
}

/** What a webhook's applied events come to: still waiting (its note), or its outcome. */
function verdictOf(
  out: ApplyOutcome,
  row: WebhookLogRow,
  r: ReturnType<typeof roundOf>,
): { wait: string } | { processing: Processing; error: string | null } {
  if (out.waiting.length)
    return { wait: `waiting for ${out.waiting.join('; ')} (look ${r.round + 1} of ${r.waits.length + 1})` };
  const [processing, error] = outcomeOf(out, row.processed_at !== null);
  return { processing, error };
}

/** After the outcome is written: an unroutable webhook is logged and counted. */
function noted(deps: WebhooksInDeps, row: WebhookLogRow, processing: Processing, error: string | null) {
  if (processing !== 'unroutable') return;
  noteUnroutable(deps, row, error);
  deps.counters?.webhookIn(row.provider, 'unroutable');
}

// One job per intake batch: the events are worked out here, between transactions, and applied
// webhook by webhook (each in its own savepoint) inside the worker's settling transaction.
function processWebhooks(
  deps: WebhooksInDeps,
  book: GatewayBook,
  savepoint: (fn: () => void) => void,
  job: Job<ProcessPayload>,
): JobResult {
  const { ctx } = deps;
  const r = roundOf(deps, job);
  const { round, waits } = r;
  const work = workOf(job.payload.webhook_ids.map((id) => getWebhookLog(ctx, id)));
  if (work.length === 0) return { type: 'ok' };
  return {
    type: 'ok',
    apply: () => {
      const waiting: string[] = [];
      for (const w of work) {
        if ('error' in w) {
          finishWebhookLog(ctx, w.row.id, 'error', w.error);
          continue;
        }
        try {
          savepoint(() => {
            const out = applyProviderEvents(ctx, w.events, applyOptions(book, w, r));
            const v = verdictOf(out, w.row, r);
            if ('wait' in v) {
              waiting.push(w.row.id);
              noteWebhookProgress(ctx, w.row.id, v.wait, out.processed > 0);
              return;
            }
            finishWebhookLog(ctx, w.row.id, v.processing, v.error);
            noted(deps, w.row, v.processing, v.error);
          });
        } catch (e) {
          // Rolled back to its savepoint: this webhook's events did not happen; the others stand.
          finishWebhookLog(ctx, w.row.id, 'error', errorMessage(e));
        }
      }
      if (waiting.length) {
        // A new job rather than a retry: waiting is not a failure and spends no attempt.
        enqueueWebhookProcessing(deps.queue, waiting, { runAt: ctx.now() + waits[round], round: round + 1 });
      }
    },
  };
}

/**
 * processWebhooks through the store (PostgreSQL): the gateways and the rows read before, the
 * apply awaited on the batch's Tx, each webhook in a savepoint of it.
 */
async function processWebhooksIn(
  deps: WebhooksInDeps,
  book: GatewayBook,
  job: Job<ProcessPayload>,
): Promise<JobResult> {
  const { ctx } = deps;
  const r = roundOf(deps, job);
  await book.load();
  const rows = new Map(
    (await webhookLogRowsIn(ctx.store, ctx.store.dialect, job.payload.webhook_ids)).map((row) => [row.id, row]),
  );
  const work = workOf(job.payload.webhook_ids.map((id) => rows.get(id)));
  if (work.length === 0) return { type: 'ok' };
  return {
    type: 'ok',
    apply: async (tx: Tx) => {
      const waiting: string[] = [];
      const unroutable: [WebhookLogRow, string | null][] = [];
      for (const w of work) {
        if ('error' in w) {
          await finishWebhookLogIn(tx, ctx, w.row.id, 'error', w.error);
          continue;
        }
        const done = await inSavepoint(tx, async () => {
          const out = await applyProviderEventsIn(tx, ctx, w.events, applyOptions(book, w, r));
          const v = verdictOf(out, w.row, r);
          if ('wait' in v) {
            waiting.push(w.row.id);
            await noteWebhookProgressIn(tx, ctx, w.row.id, v.wait, out.processed > 0);
            return;
          }
          await finishWebhookLogIn(tx, ctx, w.row.id, v.processing, v.error);
          if (v.processing === 'unroutable') unroutable.push([w.row, v.error]);
        });
        // Rolled back to its savepoint: this webhook's events did not happen; the others stand.
        if (!done.ok) await finishWebhookLogIn(tx, ctx, w.row.id, 'error', errorMessage(done.error));
      }
      if (waiting.length) {
        await deps.queue.enqueue(
          tx,
          processingJob(waiting, { runAt: ctx.now() + r.waits[r.round], round: r.round + 1 }),
        );
      }
      for (const [row, error] of unroutable) noted(deps, row, 'unroutable', error);
    },
  };
}

async function sandboxReport(
  deps: WebhooksInDeps,
  book: GatewayBook,
  job: Job<SandboxReportPayload>,
): Promise<JobResult> {
  const p = job.payload;
  await book.load();
  const gw = book.get(p.gateway_id);
  if (!gw || gw.kind !== 'sandbox') return { type: 'fail', error: `sandbox gateway ${p.gateway_id} no longer exists` };
  const bases = [...new Set([deps.callbackBase(), deps.selfUrl()].filter((b): b is string => !!b))];
  const r = await postSandboxReport(gw, { providerMessageId: p.provider_message_id, status: p.status }, bases, {
    dispatcher: deps.dispatcher,
    timeoutMs: deps.config.dispatch.timeoutMs,
    publicUrl: null,
    now: deps.ctx.now,
  });
  if (r.outcome === 'delivered') return { type: 'ok' };
  if (r.outcome === 'failed') return { type: 'fail', error: r.message };
  return bases.length === 0 ? { type: 'retry', afterMs: 1000, error: r.message } : { type: 'retry', error: r.message };
}

export function webhookRetentionTask(): MaintenanceTask<{ ctx: CoreCtx; config: Config }> {
  return {
    name: 'provider-webhooks-expire',
    cron: '29 * * * *',
    async run(deps) {
      const cutoff = deps.ctx.now() - deps.config.webhooksIn.retentionDays * 86_400_000;
      let deleted = 0;
      // Small batches, yielding between them: a big backlog must not hold the write lock.
      for (;;) {
        const n = await expireWebhookLog(deps.ctx, cutoff);
        deleted += n;
        if (n < 5000) return { deleted };
        await new Promise((r) => setImmediate(r));
      }
    },
  };
}

const unroutableLogs = new WeakMap<WebhooksInDeps, FailureLog>();

/** At info, summed up per provider: a misconfigured channel would otherwise log every event. */
function noteUnroutable(deps: WebhooksInDeps, row: WebhookLogRow, error: string | null) {
  let log = unroutableLogs.get(deps);
  if (!log) unroutableLogs.set(deps, (log = new FailureLog(deps.logger, { what: 'provider webhooks unroutable' })));
  log.failure(
    `${row.provider}:${row.gateway_id ?? ''}`,
    'unroutable',
    { provider: row.provider, gatewayId: row.gateway_id, webhookId: row.id, reason: error },
    'provider webhook unroutable: no message or channel matches its events (msgctl webhooks reprocess --unroutable once fixed)',
  );
}
