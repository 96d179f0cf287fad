import type { CoreCtx } from '../core/context.js';
import { readWebhookLog, reopenWebhookLogIn, unroutableWebhookLogIn, type WebhookLogRow } from '../core/webhook-log.js';
import { AppError, notFound } from '../lib/errors.js';
import { queueOf } from '../queue/of-ctx.js';
import { processingJob } from './intake.js';

// The operator's "process these stored webhooks again" (msgctl webhooks reprocess, the
// console's webhook tail), after fixing what made them unroutable (a channel not yet assigned,
// a wrong phone number id): the provider got its 200 and will not resend. On either store.

/** Outcomes a stored, verified webhook can be processed again from: its events did not happen. */
const REPROCESSABLE = ['unroutable', 'error'] as const;

export type ReprocessTarget = { ids: string[] } | { unroutableSince: number };

async function reprocessable(ctx: CoreCtx, id: string): Promise<WebhookLogRow> {
  const r = await readWebhookLog(ctx, id);
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
export async function reprocessWebhooks(ctx: CoreCtx, target: ReprocessTarget): Promise<string[]> {
  const picked: WebhookLogRow[] = [];
  if ('ids' in target) for (const id of target.ids) picked.push(await reprocessable(ctx, id));
  else picked.push(...(await unroutableWebhookLogIn(ctx.store, target.unroutableSince)));
  const queued = picked.map((r) => r.id);
  if (queued.length) {
    const queue = queueOf(ctx);
    await ctx.store.transaction(async (tx) => {
      for (const id of queued) await reopenWebhookLogIn(tx, id);
      for (let i = 0; i < queued.length; i += 500) await queue.enqueue(tx, processingJob(queued.slice(i, i + 500)));
    });
  }
  return queued;
}
