import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import type { CoreCtx } from './context.js';
import { windowOpen } from './customer-window.js';
import type { MessageContent, TemplateCategory } from './message-content.js';
import type { Preflight } from './send.js';
import { type TemplateRow, templateVerdict } from './whatsapp-templates.js';

// A WhatsApp template send, checked against the gateway's catalogue and priced by the
// template's current category. Called after the payload is valid and before the price.
//
// Price precedence (docs/operations.md "Prices"): the partner's price for the category, the
// default price for the category, the partner's WhatsApp price, the default WhatsApp price.
// A utility template inside an open customer-service window is free, as Meta charges it.

/** The preflight a template send is accepted with: unchanged for anything else or an unsynced catalogue. */
export async function templatePreflight(
  ctx: CoreCtx,
  partnerId: string,
  pre: Preflight,
  to: string,
  content: MessageContent,
): Promise<Preflight> {
  if (content.kind !== 'template' || pre.channel.type !== 'whatsapp') return pre;
  const gatewayId = pre.channel.gatewayId;
  const synced = await ctx.store.get<{ synced_at: number | null }>(
    sql`SELECT synced_at FROM whatsapp_template_syncs WHERE gateway_id = ${gatewayId}`,
  );
  if (!synced?.synced_at) return pre;
  const langs = await ctx.store.all<TemplateRow>(
    sql`SELECT * FROM whatsapp_templates WHERE gateway_id = ${gatewayId} AND name = ${content.template.name}
         ORDER BY language`,
  );
  const row = templateVerdict(content.template, langs);
  if (!row) return pre;
  const own = await ctx.store.get<{ amount: number }>(
    sql`SELECT amount FROM prices WHERE channel_type = 'whatsapp' AND category = ${row.category}
           AND partner_id IN (${partnerId}, '')
         ORDER BY CASE WHEN partner_id = '' THEN 1 ELSE 0 END LIMIT 1`,
  );
  const free = row.category === 'utility' && (await windowOpen(ctx, partnerId, pre.channel, to, ctx.now()));
  return {
    ...pre,
    unitPrice: free ? 0 : (own?.amount ?? pre.unitPrice),
    template: {
      check: content.template,
      note: `whatsapp template ${row.name} (${row.language}), ${row.category}${free ? ', free inside the customer-service window' : ''}`,
      category: row.category.toUpperCase() as TemplateCategory,
    },
  };
}

/**
 * A template message's category as the gateway's catalogue holds it, or null: not a template, or
 * one the catalogue does not hold (never synced, or since removed).
 */
export function catalogueCategory(
  ctx: CoreCtx,
  gatewayId: string | null,
  content: MessageContent,
): TemplateCategory | null {
  if (content.kind !== 'template' || gatewayId === null) return null;
  const row = stmt<[string, string, string], { category: string }>(
    ctx.db.sqlite,
    'SELECT category FROM whatsapp_templates WHERE gateway_id = ? AND name = ? AND language = ?',
  ).get(gatewayId, content.template.name, content.template.language);
  return row ? (row.category.toUpperCase() as TemplateCategory) : null;
}

/** catalogueCategory, read through `q` (the store, or the caller's transaction), on either store. */
export async function catalogueCategoryIn(
  q: Queryable,
  gatewayId: string | null,
  content: MessageContent,
): Promise<TemplateCategory | null> {
  if (content.kind !== 'template' || gatewayId === null) return null;
  const row = await q.get<{ category: string }>(
    sql`SELECT category FROM whatsapp_templates
         WHERE gateway_id = ${gatewayId} AND name = ${content.template.name} AND language = ${content.template.language}`,
  );
  return row ? (row.category.toUpperCase() as TemplateCategory) : null;
}
