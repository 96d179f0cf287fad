import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import type { GatewayWithSecrets } from '../core/gateway-secrets.js';
import { webhookLogInsert, type WebhookLogRow } from '../core/webhook-log.js';
import type { Batcher, BatchResult, Queryable } from '../db/query.js';
import type { SyncQueryable } from '../db/queue-statements.js';
import { newId } from '../lib/ids.js';
import {
  detectWebhook,
  metaSignedHandler,
  redactHeaders,
  type RawWebhook,
  type WebhookHandler,
  type WebhookProvider,
} from '../providers/webhooks.js';
import type { GatewayBook } from '../jobs/gateway-book.js';
import type { EnqueueSpec, JobQueue } from '../queue/queue.js';

// Intake of a provider webhook: recognise the provider, verify the signature over the raw
// bytes, then store the request and enqueue its processing in ONE group-committed
// transaction (the store's batcher, src/db/batch.ts, on either store), and answer. Nothing is processed here: providers want a 2xx fast.

export const WEBHOOK_PROCESS_JOB = 'webhook.process';
/** Tries of one processing job; waiting for a message is a new job and spends none of them. */
export const WEBHOOK_PROCESS_MAX_ATTEMPTS = 8;

export interface IncomingWebhook {
  method: string;
  /** Path and query as requested. */
  path: string;
  /** The public URL the provider called (server.publicUrl + path, or rebuilt from the request). */
  url: string;
  headers: Record<string, string | string[] | undefined>;
  raw: Buffer;
  /** ?gateway=<id> from the URL: selects the gateway when it fits the payload. */
  gatewayId?: string;
}

export type IntakeAnswer =
  | { status: 200; id: string; provider: WebhookProvider }
  | { status: 400 | 401 | 413; id: string; provider: WebhookProvider | 'unknown'; code: string; message: string };

export interface IntakeDeps {
  ctx: CoreCtx;
  config: Config;
  queue: JobQueue;
  book: GatewayBook;
  /** Counts each webhook's verdict at the door (the console's overview, metrics). */
  counters?: Counters;
}

type Verdict = { gateway: GatewayWithSecrets } | { reason: string; gatewayId: string | null };

export class WebhookIntake {
  /** The group commit of stored webhooks: an item is the webhooks of one event-loop turn. */
  private readonly batcher: Batcher<WebhookLogRow[], void>;
  /** SQLite's connection, whose transaction a batch's is: its statements run there without an await. */
  private readonly conn: SyncQueryable | undefined;
  /** The rows the current turn adds to, and the promise of their commit; taken by the batch that writes them. */
  private open: { rows: WebhookLogRow[]; done: Promise<void> } | null = null;

  constructor(private readonly deps: IntakeDeps) {
    this.conn = deps.queue.db ? deps.queue.syncConn() : undefined;
    this.batcher = deps.ctx.store.batcher('webhooks-in', (tx, turns) => this.storeBatch(tx, turns));
  }

  /** Batches committed, and the event-loop turns of webhooks in them (the bench and tests read it). */
  get stats(): { batches: number; items: number; reruns: number } {
    return this.batcher.stats;
  }

  async receive(inc: IncomingWebhook): Promise<IntakeAnswer> {
    const { ctx, config } = this.deps;
    // Through a store (PostgreSQL) the gateways are read by load() (once per turn at most);
    // on SQLite the book reads them on the connection as it is asked.
    if (!this.conn) await this.deps.book.load();
    const now = ctx.now();
    // An incoming webhook is a raw webhook (its url stays lazy: only Twilio's check reads it).
    const req: RawWebhook = inc;
    const row: WebhookLogRow = {
      id: newId('pwh'),
      provider: 'unknown',
      gateway_id: null,
      method: inc.method,
      path: inc.path,
      headers: JSON.stringify(redactHeaders(inc.headers)),
      body: inc.raw,
      verification: 'skipped',
      verification_reason: null,
      processing: 'rejected',
      error: null,
      received_at: now,
      processed_at: null,
    };
    const found = detectWebhook(req);
    // A body no handler recognises but that carries Meta's signature header is checked as Meta's
    // first: a signature that does not verify is a 401 whatever the body holds (even cut short).
    const metaSigned = found ? null : metaSignedHandler(req);
    if (!found && !metaSigned) return this.unknown(row);
    const { handler, payload } = found ?? { handler: metaSigned!, payload: null };
    row.provider = handler.provider;
    const opts = {
      now,
      acceptLegacySha1: config.webhooksIn.acceptLegacySha1,
      sendgridToleranceSeconds: config.webhooksIn.sendgridToleranceSeconds,
    };
    const sig = handler.signature(req, opts);
    const verdict: Verdict = sig.ok
      ? this.verify(handler, req, payload, sig.sig, inc.gatewayId)
      : { reason: sig.reason, gatewayId: null };
    if ('reason' in verdict) {
      Object.assign(row, {
        gateway_id: verdict.gatewayId,
        verification: 'failed',
        verification_reason: verdict.reason,
        error: 'not processed: signature not verified',
      });
      row.error += keepLess(row);
      this.deps.counters?.webhookIn(row.provider, 'bad_signature');
      await this.store(row);
      // What the signature header lacked is the sender's business; which gateways exist and
      // which secret failed is not: that stays in the log (msgctl webhooks log).
      const message = sig.ok
        ? `the signature does not verify; msgctl webhooks log on msgd shows why (webhook ${row.id})`
        : verdict.reason;
      return { status: 401, id: row.id, provider: handler.provider, code: 'invalid_signature', message };
    }
    row.gateway_id = verdict.gateway.id;
    row.verification = 'ok';
    if (!found) return this.unknown(row);
    row.processing = 'pending';
    this.deps.counters?.webhookIn(row.provider, 'verified');
    await this.store(row);
    return { status: 200, id: row.id, provider: handler.provider };
  }

  /** A body no provider sends (or a Meta-signed one that verified but is no Meta payload): 400, logged, not processed. */
  private async unknown(row: WebhookLogRow): Promise<IntakeAnswer> {
    row.error =
      'unrecognised payload: not a WhatsApp, Messenger, Instagram, Twilio, SendGrid or sandbox webhook' + keepLess(row);
    await this.store(row);
    return { status: 400, id: row.id, provider: 'unknown', code: 'unknown_payload', message: row.error };
  }

  /** A body over the size limit never reaches a parser; log that it came, without it. */
  async tooLarge(inc: Omit<IncomingWebhook, 'raw'>, limit: number): Promise<IntakeAnswer> {
    // It needs no gateway, but through a store it waits for the same read as the webhooks that
    // came with it, so a burst stays one batch (a row stored before that read resolves would
    // start a batch of its own).
    if (!this.conn) await this.deps.book.load();
    const message = `the body is larger than ${limit} bytes`;
    const row: WebhookLogRow = {
      id: newId('pwh'),
      provider: guessProvider(inc.headers),
      gateway_id: null,
      method: inc.method,
      path: inc.path,
      headers: JSON.stringify(redactHeaders(inc.headers)),
      body: null,
      verification: 'skipped',
      verification_reason: null,
      processing: 'rejected',
      error: message,
      received_at: this.deps.ctx.now(),
      processed_at: null,
    };
    await this.store(row);
    return { status: 413, id: row.id, provider: 'unknown', code: 'payload_too_large', message };
  }

  private verify(
    handler: WebhookHandler,
    req: RawWebhook,
    payload: unknown,
    sig: unknown,
    gatewayId?: string,
  ): Verdict {
    const { book } = this.deps;
    const named = gatewayId ? book.get(gatewayId) : null;
    let candidates: GatewayWithSecrets[];
    let prefix = '';
    if (named && handler.kinds.includes(named.kind)) candidates = [named];
    else {
      if (gatewayId)
        prefix = named
          ? `gateway ${named.name} in the URL is a ${named.kind}, not a ${handler.kinds.join('/')}; `
          : `gateway "${gatewayId}" in the URL does not exist; `;
      // Several gateways can share one provider account (a Meta app, a Twilio account):
      // ids in the payload narrow it down, otherwise every gateway of the kind is tried.
      const hinted = book.byHints(handler.hints(payload));
      candidates = hinted.length ? hinted : book.ofKinds(handler.kinds);
    }
    const oneId = candidates.length === 1 ? candidates[0].id : null;
    if (candidates.length === 0)
      return { reason: `${prefix}no ${handler.kinds.join('/')} gateway matches this webhook`, gatewayId: null };
    const keyed = candidates.filter(
      (g) => typeof g.secrets[handler.secretName] === 'string' && g.secrets[handler.secretName] !== '',
    );
    if (keyed.length === 0) {
      return {
        reason: `${prefix}gateway ${candidates.map((g) => g.name).join(', ')} has no ${handler.secretName} secret to verify with`,
        gatewayId: oneId,
      };
    }
    const match = keyed.find((g) => handler.matches(req, payload, sig, g.secrets[handler.secretName]));
    if (match) return { gateway: match };
    return {
      reason: `${prefix}signature does not match the ${handler.secretName} of gateway ${keyed.map((g) => g.name).join(', ')}`,
      gatewayId: oneId,
    };
  }

  /**
   * Every webhook of one event-loop turn goes into one batch of the store's group commit, with
   * ONE processing job (payload {webhook_ids}) for all of them: a job, or a promise, per webhook
   * would cost as much as everything else the intake does.
   */
  private store(row: WebhookLogRow): Promise<void> {
    if (!this.open) {
      const rows: WebhookLogRow[] = [];
      this.open = { rows, done: this.batcher.run(rows) };
    }
    this.open.rows.push(row);
    return this.open.done;
  }

  /**
   * A batch's writes: each turn's rows and its one processing job. On SQLite every row's INSERT
   * and the job run synchronously on the connection inside the batch's transaction (no await
   * per webhook); on PostgreSQL each is awaited on the batch's Tx. Rows are new ids: nothing
   * here fails one turn alone, so a throw fails the batch (the batcher then runs its turns
   * again one by one).
   */
  private async storeBatch(tx: Queryable, turns: readonly WebhookLogRow[][]): Promise<BatchResult<void>[]> {
    const { ctx, queue } = this.deps;
    const conn = this.conn;
    // A turn being written takes no more rows: later ones go into the next batch.
    if (this.open && turns.includes(this.open.rows)) this.open = null;
    for (const rows of turns) {
      const ids: string[] = [];
      for (const r of rows) {
        if (conn) conn.run(webhookLogInsert(r));
        else await tx.run(webhookLogInsert(r));
        if (r.processing === 'pending') ids.push(r.id);
      }
      if (ids.length) {
        const spec = processingJob(ids, { runAt: processingSlot(ctx.now()) });
        if (conn) queue.enqueue(spec);
        else await queue.enqueue(tx, spec);
      }
    }
    return turns.map(() => OK);
  }
}

const OK: BatchResult<void> = { ok: true, value: undefined };

/**
 * Queue stored webhooks for processing, one job for the lot. `round` numbers the follow-ups
 * of webhooks waiting for their message (a new job each, spending no attempt).
 */
export function enqueueWebhookProcessing(
  queue: JobQueue,
  ids: string[],
  opts: { runAt?: number; round?: number } = {},
): void {
  queue.enqueue(processingJob(ids, opts));
}

/** The processing job of stored webhooks; `round` numbers the follow-ups of those waiting for their message. */
export function processingJob(ids: string[], opts: { runAt?: number; round?: number } = {}): EnqueueSpec {
  const payload = opts.round === undefined ? { webhook_ids: ids } : { webhook_ids: ids, round: opts.round };
  return { kind: WEBHOOK_PROCESS_JOB, payload, runAt: opts.runAt, maxAttempts: WEBHOOK_PROCESS_MAX_ATTEMPTS };
}

/**
 * Processing runs on a grid of PROCESS_SLOT_MS: every intake batch of one slot becomes
 * runnable at the same instant, so under load the worker takes them in one claim and applies
 * them in one commit (and the outbound fan-out behind it in one more), instead of a commit
 * per intake batch. The cost is up to PROCESS_SLOT_MS of extra latency, which no provider sees.
 */
export const PROCESS_SLOT_MS = 50;

export function processingSlot(now: number): number {
  return Math.ceil((now + 1) / PROCESS_SLOT_MS) * PROCESS_SLOT_MS;
}

/**
 * How much of a refused request's body is kept: enough to see what it was, not enough for
 * anyone on the internet to fill the disk with unsigned megabytes (kept webhooksIn.retentionDays).
 */
export const REFUSED_BODY_KEEP_BYTES = 64 * 1024;

/** Trim a refused row's body to REFUSED_BODY_KEEP_BYTES; the note for its error, if trimmed. */
function keepLess(row: WebhookLogRow): string {
  const body = row.body;
  if (!body || body.length <= REFUSED_BODY_KEEP_BYTES) return '';
  row.body = body.subarray(0, REFUSED_BODY_KEEP_BYTES);
  return ` (refused: only the first ${REFUSED_BODY_KEEP_BYTES} of ${body.length} bytes of the body are kept)`;
}

function guessProvider(headers: Record<string, unknown>): string {
  if (headers['x-hub-signature-256'] !== undefined || headers['x-hub-signature'] !== undefined) return 'meta';
  if (headers['x-twilio-email-event-webhook-signature'] !== undefined) return 'sendgrid';
  if (headers['x-twilio-signature'] !== undefined) return 'twilio';
  if (headers['x-msgd-sandbox-signature'] !== undefined) return 'sandbox';
  return 'unknown';
}
