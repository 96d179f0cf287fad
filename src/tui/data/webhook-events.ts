import type { CoreCtx } from '../../core/context.js';
import type { WebhookLogRow } from '../../core/webhook-log.js';
import { messageIdByProviderId, messageStatusByProviderId, messageStatusOf } from '../../core/message-reads.js';
import { type NormalizedEvent, parseStoredWebhook } from '../../providers/webhooks.js';
import type { TemplateChange } from '../../core/whatsapp-templates.js';

// What a stored webhook says, in msgd's terms, for the tail's detail pane: each event parsed
// from the stored body as processing parses it, with the message a status names and where
// that message stands now.

export async function describeEvents(ctx: CoreCtx, row: WebhookLogRow): Promise<string[]> {
  if (row.verification !== 'ok') return ['not processed: its signature was not verified'];
  const parsed = parseStoredWebhook(row);
  if ('fault' in parsed) {
    if (parsed.fault === 'no_handler') return [`no handler for provider ${row.provider}`];
    if (parsed.fault === 'no_parse') return ['the stored body does not parse'];
    return [`the stored body does not parse: ${(parsed.error as Error).message}`];
  }
  const { events } = parsed;
  if (events.length === 0) return ['no events in it'];
  const out: string[] = [];
  for (const ev of events.slice(0, 20)) {
    if (ev.type === 'message')
      out.push(`inbound message from ${ev.from}${ev.providerMessageId ? ` (${ev.providerMessageId})` : ''}`);
    else if (ev.type === 'watermark') out.push(`${ev.status} up to a watermark, for ${ev.contact}`);
    else if (ev.type === 'unsend') out.push(`${ev.from} unsent ${ev.providerMessageId}`);
    else if (ev.type === 'template') out.push(templateWords(ev.change));
    else if (ev.type !== 'status') out.push(ev.note);
    else {
      const ref = ev.ref.messageId ?? ev.ref.providerMessageId ?? '?';
      const m =
        (ev.ref.messageId && (await messageStatusOf(ctx, ev.ref.messageId))) ||
        (ev.ref.providerMessageId && (await messageStatusByProviderId(ctx, ev.ref.providerMessageId))) ||
        null;
      const what = ev.status ? `status ${ev.status}` : `${ev.providerStatus} (history only)`;
      // The message first: the provider's id is long and the pane is 78 columns.
      out.push(`${what}: ${m ? `message ${m.id} (now ${m.status})` : 'no message here has this id'} · ${ref}`);
    }
  }
  return out;
}

/** An id cut to fit a narrow column: its first and last (random, telling) characters. */
export function shortId(id: string): string {
  return id.length > 14 ? `${id.slice(0, 3)}…${id.slice(-8)}` : id;
}

/**
 * The tail's NOTE for a verified webhook, in a few words: each event's type and the message it
 * names (msgd's id, cut to its telling end, where the message is here, else the provider's), so
 * an inbound message, a delivery receipt and a read receipt read differently at a glance. The
 * detail pane (Enter) gives the whole ids; the filter's free text finds a whole id.
 */
export async function eventNote(ctx: CoreCtx, row: WebhookLogRow): Promise<{ short: string; full: string }> {
  const parsed = parseStoredWebhook(row);
  if ('fault' in parsed) {
    const t = parsed.fault === 'no_handler' ? 'no handler' : 'body does not parse';
    return { short: t, full: t };
  }
  const { events } = parsed;
  if (events.length === 0) return { short: 'no events', full: 'no events' };
  const words: [string, string][] = [];
  for (const ev of events.slice(0, 2)) words.push(await eventWords(ctx, ev));
  const more = events.length > 2 ? ` +${events.length - 2} more` : '';
  return { short: words.map((w) => w[0]).join(', ') + more, full: words.map((w) => w[1]).join(', ') + more };
}

/** One event's words in the NOTE: short, and with whole ids (for the filter). */
async function eventWords(ctx: CoreCtx, ev: NormalizedEvent): Promise<[string, string]> {
    if (ev.type === 'message') {
      const m = ev.providerMessageId ? await messageIdByProviderId(ctx, ev.providerMessageId) : undefined;
      const other = ev.providerMessageId ?? `from ${ev.from}`;
      return m ? [`inbound ${shortId(m)}`, `inbound ${m} ${other}`] : [`inbound ${other}`, `inbound ${other}`];
    }
    if (ev.type === 'watermark') return [`${ev.status} watermark`, `${ev.status} watermark ${ev.contact}`];
    if (ev.type === 'unsend') {
      const m = await messageIdByProviderId(ctx, ev.providerMessageId);
      return [`unsent ${shortId(m ?? ev.providerMessageId)}`, `unsent ${m ?? ''} ${ev.providerMessageId} ${ev.from}`];
    }
    if (ev.type === 'template') return [templateWords(ev.change), templateWords(ev.change)];
    if (ev.type !== 'status') return [ev.note, ev.note];
    const what = ev.status ?? ev.providerStatus;
    const m =
      ev.ref.messageId ??
      (ev.ref.providerMessageId ? await messageIdByProviderId(ctx, ev.ref.providerMessageId) : undefined);
    const other = ev.ref.providerMessageId ?? '';
    return m
      ? [`${what} ${shortId(m)}`, `${what} ${m} ${other}`]
      : [`${what} ${other ? shortId(other) : '?'}`, `${what} ${other}`];
}

function templateWords(c: TemplateChange): string {
  const what = [c.status, c.category].filter(Boolean).join(', ');
  return `template ${c.name ?? c.metaId ?? '?'} ${c.language ?? ''} ${what}`.replace(/\s+/g, ' ');
}
