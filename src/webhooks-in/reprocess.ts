import type { CoreCtx } from '../core/context.js';
import { getWebhookLog, reopenWebhookLog, unroutableWebhookLog, type WebhookLogRow } from '../core/webhook-log.js';
import { AppError, notFound } from '../lib/errors.js';
import { JobQueue } from '../queue/queue.js';
import { enqueueWebhookProcessing } from './intake.js';

// The operator's "process these stored webhooks again" (msgctl webhooks reprocess, the
// console's webhook tail), after fixing what made them unroutable (a channel not yet assigned,
// a wrong phone number id): the provider got its 200 and will not resend.

/** Outcomes a stored, verified webhook can be processed again from: its events did not happen. */
const REPROCESSABLE = ['unroutable', 'error'] as const;

export type ReprocessTarget = { ids: string[] } | { unroutableSince: number };

function reprocessable(ctx: CoreCtx, id: string): WebhookLogRow {
  const r = getWebhookLog(ctx, id);
  if (!r) throw notFound('webhook', id);
  if (r.verification !== 'ok')
    throw new AppError(
      'conflict',
      `webhook ${id} was not verified (${r.verification_reason ?? r.verification}): it is never processed`,
    );
  if (!(REPROCESSABLE as readonly string[]).includes(r.processing))
    throw new AppError(
      'conflict',
      `webhook ${id} is ${r.processing}: only unroutable or errored webhooks are processed again`,
    );
  return r;
}

/**
 * Sets the webhooks back to pending and queues their processing, in one transaction. Only
 * verified rows whose events did not apply; events that did apply are deduped anyway.
 * Returns the ids queued.
 */
export function reprocessWebhooks(ctx: CoreCtx, target: ReprocessTarget): string[] {
  const picked =
    'ids' in target
      ? target.ids.map((id) => reprocessable(ctx, id))
      : unroutableWebhookLog(ctx, target.unroutableSince);
  const queued = picked.map((r) => r.id);
  if (queued.length) {
    ctx.db.sqlite
      .transaction(() => {
        for (const id of queued) reopenWebhookLog(ctx, id);
        const queue = new JobQueue(ctx.db);
        for (let i = 0; i < queued.length; i += 500) enqueueWebhookProcessing(queue, queued.slice(i, i + 500));
      })
      .immediate();
  }
  return queued;
}
