import type { CoreCtx } from '../../src/core/context.js';
import { readWebhookLog, type WebhookLogRow } from '../../src/core/webhook-log.js';
import { sql } from '../../src/db/sql.js';
import { waitFor } from './wait.js';

// The provider webhook log as the operator sees it (msgctl webhooks log): a received
// webhook's row, and the wait for its processing job to settle it. Read through ctx.store, so
// on either store.

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

export async function row(ctx: CoreCtx, id: string): Promise<WebhookLogRow> {
  const r = await readWebhookLog(ctx, id);
  if (!r) throw new Error(`no webhook log row ${id}`);
  return r;
}

/** The newest log row (for requests whose answer carries no id in the body). */
export async function lastRow(ctx: CoreCtx): Promise<WebhookLogRow> {
  const r = await ctx.store.get<WebhookLogRow>(sql`SELECT * FROM provider_webhooks ORDER BY id DESC LIMIT 1`);
  if (!r) throw new Error('no webhook log row');
  return r;
}
