import { and, asc, eq } from 'drizzle-orm';
import { channels, gateways } from '../db/schema.js';
import { AppError, invalid, notFound } from '../lib/errors.js';
import { isEmail } from '../lib/email.js';
import { newId } from '../lib/ids.js';
import { normalizeSenderE164 } from '../lib/phone.js';
import { iso } from '../lib/time.js';
import { CHANNEL_TYPES, type ChannelType, type CoreCtx } from './context.js';
import { audit } from './audit.js';
import { GATEWAY_KINDS } from './gateway-kinds.js';
import { getGatewayRow } from './gateways.js';
import { getPartner } from './partners.js';

export type Channel = typeof channels.$inferSelect;

export function isChannelType(t: string): t is ChannelType {
  return (CHANNEL_TYPES as readonly string[]).includes(t);
}

/** The sender address a channel of this type needs, normalised; throws on a bad one. */
export function normalizeSender(type: ChannelType, sender: string): string {
  switch (type) {
    case 'sms':
    case 'whatsapp': {
      const n = normalizeSenderE164(sender);
      if (!n)
        throw invalid(`"${sender}" is not a valid E.164 number`, [
          { field: 'from', message: 'E.164 with a leading +, e.g. +15550001111' },
        ]);
      return n;
    }
    case 'email':
      if (!isEmail(sender))
        throw invalid(`"${sender}" is not a valid email address`, [
          { field: 'from', message: 'an address such as news@example.com' },
        ]);
      return sender.toLowerCase();
    case 'messenger':
    case 'instagram':
      if (!/^\d{1,32}$/.test(sender))
        throw invalid(`"${sender}" is not a numeric ${type === 'messenger' ? 'page' : 'Instagram account'} id`, [
          { field: 'from', message: 'digits only' },
        ]);
      return sender;
  }
}

/** The natural sender of a gateway for a channel type when the operator gives none. */
function defaultSender(kind: string, type: ChannelType, settings: Record<string, any>): string | undefined {
  if (kind === 'meta_messenger' && type === 'messenger') return settings.page_id;
  if (kind === 'meta_instagram' && type === 'instagram') return settings.ig_account_id;
  return undefined;
}

export function assignChannel(
  ctx: CoreCtx,
  input: { partner: string; gateway: string; type: string; sender?: string },
  actor: string,
): Channel {
  if (!isChannelType(input.type)) {
    throw invalid(`unknown channel type "${input.type}"`, [
      { field: 'type', message: `one of ${CHANNEL_TYPES.join(', ')}` },
    ]);
  }
  const type = input.type;
  return ctx.db.sqlite
    .transaction(() => {
      const partner = getPartner(ctx, input.partner);
      const gw = getGatewayRow(ctx, input.gateway);
      const spec = GATEWAY_KINDS[gw.kind];
      if (!spec.channels.includes(type)) {
        throw invalid(`a ${gw.kind} gateway cannot serve ${type}; it serves ${spec.channels.join(', ')}`);
      }
      const raw = input.sender ?? defaultSender(gw.kind, type, JSON.parse(gw.settings));
      if (!raw)
        throw invalid(`the sender address (--from) is required for a ${type} channel`, [
          { field: 'from', message: 'required' },
        ]);
      const sender = normalizeSender(type, raw);
      const mine = ctx.db.orm
        .select()
        .from(channels)
        .where(and(eq(channels.partnerId, partner.id), eq(channels.type, type), eq(channels.status, 'active')))
        .get();
      if (mine) {
        throw new AppError(
          'conflict',
          `partner "${partner.slug}" already has an active ${type} channel (${mine.id}); unassign it first`,
        );
      }
      const taken = ctx.db.orm
        .select()
        .from(channels)
        .where(and(eq(channels.type, type), eq(channels.sender, sender), eq(channels.status, 'active')))
        .get();
      if (taken)
        throw new AppError('conflict', `${type} sender ${sender} is already assigned to another partner (${taken.id})`);
      const now = ctx.now();
      const row: Channel = {
        id: newId('ch'),
        partnerId: partner.id,
        gatewayId: gw.id,
        type,
        sender,
        status: 'active',
        createdAt: now,
        updatedAt: now,
      };
      ctx.db.orm.insert(channels).values(row).run();
      audit(ctx, actor, 'channel.assign', 'channel', row.id, { partner: partner.slug, gateway: gw.name, type, sender });
      return row;
    })
    .immediate();
}

/** Unassign by channel id, or by partner + type. */
export function unassignChannel(
  ctx: CoreCtx,
  input: { channel?: string; partner?: string; type?: string },
  actor: string,
): Channel {
  return ctx.db.sqlite
    .transaction(() => {
      let row: Channel | undefined;
      if (input.channel) {
        row = ctx.db.orm.select().from(channels).where(eq(channels.id, input.channel)).get();
      } else if (input.partner && input.type) {
        const partner = getPartner(ctx, input.partner);
        row = ctx.db.orm
          .select()
          .from(channels)
          .where(
            and(
              eq(channels.partnerId, partner.id),
              eq(channels.type, input.type as ChannelType),
              eq(channels.status, 'active'),
            ),
          )
          .get();
      }
      if (!row) throw notFound('active channel', input.channel ?? `${input.partner} ${input.type}`);
      if (row.status !== 'active') throw new AppError('conflict', `channel ${row.id} is already unassigned`);
      ctx.db.orm
        .update(channels)
        .set({ status: 'inactive', updatedAt: ctx.now() })
        .where(eq(channels.id, row.id))
        .run();
      audit(ctx, actor, 'channel.unassign', 'channel', row.id, { type: row.type, sender: row.sender });
      return { ...row, status: 'inactive' as const };
    })
    .immediate();
}

export interface ChannelWithGateway extends Channel {
  gatewayName: string;
  gatewayKind: string;
  gatewayStatus: string;
}

export function listChannels(
  ctx: CoreCtx,
  opts: { partner?: string; includeInactive?: boolean } = {},
): ChannelWithGateway[] {
  const conds = [];
  if (opts.partner) conds.push(eq(channels.partnerId, getPartner(ctx, opts.partner).id));
  if (!opts.includeInactive) conds.push(eq(channels.status, 'active'));
  return ctx.db.orm
    .select({
      ch: channels,
      gatewayName: gateways.name,
      gatewayKind: gateways.kind,
      gatewayStatus: gateways.status,
    })
    .from(channels)
    .innerJoin(gateways, eq(gateways.id, channels.gatewayId))
    .where(conds.length ? and(...conds) : undefined)
    .orderBy(asc(channels.partnerId), asc(channels.type))
    .all()
    .map((r) => ({ ...r.ch, gatewayName: r.gatewayName, gatewayKind: r.gatewayKind, gatewayStatus: r.gatewayStatus }));
}

export function channelJson(c: Channel | ChannelWithGateway) {
  const g = c as Partial<ChannelWithGateway>;
  return {
    id: c.id,
    partner_id: c.partnerId,
    type: c.type,
    sender: c.sender,
    status: c.status,
    gateway:
      g.gatewayName !== undefined ? { id: c.gatewayId, name: g.gatewayName, kind: g.gatewayKind } : { id: c.gatewayId },
    created_at: iso(c.createdAt),
    updated_at: iso(c.updatedAt),
  };
}
