import type { CoreCtx } from '../../core/context.js';
import {
  latestWebhookLog,
  readWebhookLog,
  webhookLogAfter,
  webhookLogByIds,
  type WebhookLogRow,
  type WebhookLogSummary,
} from '../../core/webhook-log.js';
import { attemptLinesAfter, latestAttemptLines, type AttemptLine } from '../../webhooks-out/store.js';

// The webhook tail's reads: the newest rows by primary key, then only rows after the last one
// seen, plus the few shown rows still pending (one statement for any number of them). Filters
// apply in memory to that bounded window, so a rare provider or gateway never makes a read walk
// the whole log.

export { gatewayNames } from '../../core/gateways.js';

/** How many rows the tail keeps and filters over. */
export const TAIL_WINDOW = 2000;

export type TailRow = WebhookLogSummary;
export type AttemptRow = AttemptLine;

export const latestWebhooks = (ctx: CoreCtx, limit = TAIL_WINDOW): Promise<TailRow[]> =>
  latestWebhookLog(ctx, limit);

export const webhooksAfter = (ctx: CoreCtx, afterId: string, limit = TAIL_WINDOW): Promise<TailRow[]> =>
  webhookLogAfter(ctx, afterId, limit);

/** The current state of rows that were pending when last read. */
export const webhooksByIds = (ctx: CoreCtx, ids: string[]): Promise<TailRow[]> => webhookLogByIds(ctx, ids);

export const webhookDetail = (ctx: CoreCtx, id: string): Promise<WebhookLogRow | undefined> =>
  readWebhookLog(ctx, id);

export const latestAttempts = (ctx: CoreCtx, limit = TAIL_WINDOW): Promise<AttemptRow[]> =>
  latestAttemptLines(ctx, limit);

export const attemptsAfter = (ctx: CoreCtx, afterId: number, limit = TAIL_WINDOW): Promise<AttemptRow[]> =>
  attemptLinesAfter(ctx, afterId, limit);
