import type { Dispatcher } from 'undici';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import { applyProviderEvents, type ApplyOutcome, type ProviderEvent } from '../core/inbound.js';
import {
  expireWebhookLog,
  finishWebhookLog,
  getWebhookLog,
  noteWebhookProgress,
  type Processing,
  type WebhookLogRow,
} from '../core/webhook-log.js';
import { postSandboxReport, SANDBOX_REPORT_JOB, type SandboxReportPayload } from '../providers/sandbox/report.js';
import { parseStoredWebhook, type WebhookHandler } from '../providers/webhooks.js';
import type { Logger } from 'pino';
import { FailureLog } from '../lib/failure-log.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';
import type { Job, JobQueue } from '../queue/queue.js';
import type { Worker } from '../queue/worker.js';
import { errorMessage, type JobResult } from '../queue/settle.js';
import type { GatewayBook } from '../jobs/gateway-book.js';
import { WEBHOOK_PROCESS_JOB, enqueueWebhookProcessing } from './intake.js';

// The jobs behind the inbound webhook endpoints: processing stored webhooks (dedupe, route,
// apply) and the sandbox's delivery report. Processing applies inside the worker's batch
// transaction (apply), so thousands of webhooks share a commit.

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
  // Built once: better-sqlite3's transaction() wrapper is costly to create per call.
  const savepoint = deps.ctx.db.sqlite.transaction((fn: () => void) => fn());
  worker.register<ProcessPayload>(WEBHOOK_PROCESS_JOB, (job) => processWebhooks(deps, book, savepoint, job), {
    onDead: (job, error) => {
      for (const id of job.payload.webhook_ids) {
        if (getWebhookLog(deps.ctx, id)?.processing === 'pending') finishWebhookLog(deps.ctx, id, 'error', error);
      }
    },
  });
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

// One job per intake batch: the events are worked out here, between transactions, and applied
// webhook by webhook (each in its own savepoint) inside the worker's settling transaction.
function processWebhooks(
  deps: WebhooksInDeps,
  book: GatewayBook,
  savepoint: (fn: () => void) => void,
  job: Job<ProcessPayload>,
): JobResult {
  const { ctx } = deps;
  const round = job.payload.round ?? 0;
  const waits = waitForMessageMs(deps.config.dispatch.timeoutMs);
  const final = round >= waits.length;
  const refundOnFailure = deps.config.billing.refundOnProviderFailure === 'always';
  const work: (Parsed | { row: WebhookLogRow; error: string })[] = [];
  for (const id of job.payload.webhook_ids) {
    const row = getWebhookLog(ctx, id);
    // Gone (retention) or settled by an earlier run whose completion was lost.
    if (!row || row.processing !== 'pending') continue;
    const p = parseStored(row);
    work.push(typeof p === 'string' ? { row, error: p } : p);
  }
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
            const signer = w.row.gateway_id ? book.get(w.row.gateway_id) : null;
            const out = applyProviderEvents(ctx, w.events, {
              trusted: (id) => book.trusts(w.handler, signer, id),
              refundOnFailure,
              final,
            });
            if (out.waiting.length) {
              waiting.push(w.row.id);
              const note = `waiting for ${out.waiting.join('; ')} (look ${round + 1} of ${waits.length + 1})`;
              noteWebhookProgress(ctx, w.row.id, note, out.processed > 0);
              return;
            }
            const [processing, error] = outcomeOf(out, w.row.processed_at !== null);
            finishWebhookLog(ctx, w.row.id, processing, error);
            if (processing === 'unroutable') {
              noteUnroutable(deps, w.row, error);
              deps.counters?.webhookIn(w.row.provider, 'unroutable');
            }
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

async function sandboxReport(
  deps: WebhooksInDeps,
  book: GatewayBook,
  job: Job<SandboxReportPayload>,
): Promise<JobResult> {
  const p = job.payload;
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
