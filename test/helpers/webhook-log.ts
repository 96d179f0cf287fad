import type { CoreCtx } from '../../src/core/context.js';
import { getWebhookLog, readWebhookLog, type WebhookLogRow } from '../../src/core/webhook-log.js';
import { waitFor } from './wait.js';

// The provider webhook log as the operator sees it (msgctl webhooks log): a received
// webhook's row, and the wait for its processing job to settle it.

/** The log row once its processing job has settled it. */
export function processed(ctx: CoreCtx, id: string, timeoutMs = 15_000): Promise<WebhookLogRow> {
  return waitFor(
    async () => {
      const r = await readWebhookLog(ctx, id);
      return r && r.processing !== 'pending' ? r : undefined;
    },
    `webhook ${id} to be processed`,
    timeoutMs,
  );
}

export function row(ctx: CoreCtx, id: string): WebhookLogRow {
  const r = getWebhookLog(ctx, id);
  if (!r) throw new Error(`no webhook log row ${id}`);
  return r;
}

/** The newest log row (for requests whose answer carries no id in the body). */
export function lastRow(ctx: CoreCtx): WebhookLogRow {
  return ctx.db.sqlite.prepare('SELECT * FROM provider_webhooks ORDER BY id DESC LIMIT 1').get() as WebhookLogRow;
}
