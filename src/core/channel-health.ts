import type { channels, gateways, messages } from '../db/schema.js';
import type { Row } from '../db/rows.js';
import { indexedBy } from '../db/dialect.js';
import { sql } from '../db/sql.js';
import { idFloor } from '../lib/id-time.js';
import { iso } from '../lib/time.js';
import type { CoreCtx } from './context.js';

// A partner's view of its channels: type, sender address and how the gateway behind each
// is doing, judged from the outcomes of its recent sends. Never the gateway's settings or
// credentials: those are the operator's.

export const HEALTH_WINDOW_MS = 15 * 60_000;
/** Bound the work on a busy partner: the most recent sends say enough. */
const SAMPLE = 5000;

export type ChannelHealth = 'ok' | 'degraded' | 'down' | 'disabled' | 'unknown';

type ChannelRow = Pick<Row<typeof channels>, 'id' | 'type' | 'sender' | 'position' | 'created_at'> & {
  gateway_kind: Row<typeof gateways>['kind'];
  gateway_status: Row<typeof gateways>['status'];
};

interface Outcomes {
  accepted: number;
  failed: number;
  retrying: number;
  queued: number;
}

const PENDING = new Set(['queued', 'sending']);

export async function partnerChannels(ctx: CoreCtx, partnerId: string) {
  const rows = await ctx.store.all<ChannelRow>(
    sql`SELECT c.id, c.type, c.sender, c.position, g.kind AS gateway_kind, g.status AS gateway_status, c.created_at
       FROM channels c JOIN gateways g ON g.id = c.gateway_id
      WHERE c.partner_id = ${partnerId} AND c.status = 'active' ORDER BY c.type, c.position, c.id`,
  );
  const now = ctx.now();
  const since = now - HEALTH_WINDOW_MS;
  // Ids start with their creation time: the window is a range on messages_partner.
  const recent = await ctx.store.all<Pick<Row<typeof messages>, 'channel_id' | 'status' | 'error_code'>>(
    sql`SELECT channel_id, status, error_code FROM messages ${indexedBy(ctx.store.dialect, 'messages_partner')}
      WHERE partner_id = ${partnerId} AND id >= ${idFloor('msg', since)} AND direction = 'outbound' AND created_at >= ${since}
      ORDER BY id DESC LIMIT ${SAMPLE}`,
  );
  const byChannel = new Map<string, Outcomes>();
  for (const m of recent) {
    // Every outbound message has its channel; the column allows none for inbound ones.
    if (m.channel_id === null) continue;
    let o = byChannel.get(m.channel_id);
    if (!o) byChannel.set(m.channel_id, (o = { accepted: 0, failed: 0, retrying: 0, queued: 0 }));
    if (m.status === 'failed') o.failed++;
    else if (PENDING.has(m.status)) {
      if (m.error_code) o.retrying++;
      else o.queued++;
    } else o.accepted++;
  }
  return rows.map((r) => {
    const o = byChannel.get(r.id) ?? { accepted: 0, failed: 0, retrying: 0, queued: 0 };
    return {
      id: r.id,
      type: r.type,
      sender: r.sender,
      provider: r.gateway_kind,
      position: r.position,
      role: r.position === 0 ? ('primary' as const) : ('fallback' as const),
      status: r.gateway_status === 'active' ? ('active' as const) : ('disabled' as const),
      health: healthOf(r.gateway_status, o),
      recent: { window_seconds: HEALTH_WINDOW_MS / 1000, ...o },
      created_at: iso(r.created_at)!,
    };
  });
}

export function healthOf(gatewayStatus: string, o: Outcomes): ChannelHealth {
  if (gatewayStatus !== 'active') return 'disabled';
  const bad = o.failed + o.retrying;
  const total = o.accepted + bad;
  if (total === 0) return 'unknown';
  if (o.accepted === 0 && bad >= 3) return 'down';
  return bad / total >= 0.2 ? 'degraded' : 'ok';
}
