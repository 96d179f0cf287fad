import type { Row } from '../db/rows.js';
import type { channels, gateways } from '../db/schema.js';
import { stmt } from '../db/stmt.js';
import { AppError, invalid, notFound } from '../lib/errors.js';
import { isEmail } from '../lib/email.js';
import { newId } from '../lib/ids.js';
import { normalizeSenderE164 } from '../lib/phone.js';
import { iso } from '../lib/time.js';
import { CHANNEL_TYPES, type ChannelType, type CoreCtx } from './context.js';
import { audit } from './audit.js';
import { getGatewayRow } from './gateways.js';
import { getPartner } from './partners.js';

export type Channel = Row<typeof channels>;

const ACTIVE_OF_PARTNER = "SELECT * FROM channels WHERE partner_id = ? AND type = ? AND status = 'active'";

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
      const spec = ctx.gatewayKinds.get(gw.kind);
      if (!spec.channels.includes(type)) {
        throw invalid(`a ${gw.kind} gateway cannot serve ${type}; it serves ${spec.channels.join(', ')}`);
      }
      const raw = input.sender ?? spec.defaultSender?.(type, JSON.parse(gw.settings));
      if (!raw)
        throw invalid(`the sender address is required for a ${type} channel`, [{ field: 'from', message: 'required' }]);
      const sender = normalizeSender(type, raw);
      const mine = stmt<[string, string], Channel>(ctx.db.sqlite, ACTIVE_OF_PARTNER).get(partner.id, type);
      if (mine) {
        throw new AppError(
          'conflict',
          `partner "${partner.slug}" already has an active ${type} channel (${mine.id}); unassign it first`,
        );
      }
      const taken = stmt<[string, string], Channel>(
        ctx.db.sqlite,
        "SELECT * FROM channels WHERE type = ? AND sender = ? AND status = 'active'",
      ).get(type, sender);
      if (taken)
        throw new AppError('conflict', `${type} sender ${sender} is already assigned to another partner (${taken.id})`);
      const now = ctx.now();
      const row: Channel = {
        id: newId('ch'),
        partner_id: partner.id,
        gateway_id: gw.id,
        type,
        sender,
        status: 'active',
        created_at: now,
        updated_at: now,
      };
      stmt(
        ctx.db.sqlite,
        `INSERT INTO channels (id, partner_id, gateway_id, type, sender, status, created_at, updated_at)
         VALUES (@id, @partner_id, @gateway_id, @type, @sender, @status, @created_at, @updated_at)`,
      ).run(row);
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
        row = stmt<[string], Channel>(ctx.db.sqlite, 'SELECT * FROM channels WHERE id = ?').get(input.channel);
      } else if (input.partner && input.type) {
        const partner = getPartner(ctx, input.partner);
        row = stmt<[string, string], Channel>(ctx.db.sqlite, ACTIVE_OF_PARTNER).get(partner.id, input.type);
      }
      if (!row) throw notFound('active channel', input.channel ?? `${input.partner} ${input.type}`);
      if (row.status !== 'active') throw new AppError('conflict', `channel ${row.id} is already unassigned`);
      stmt(ctx.db.sqlite, "UPDATE channels SET status = 'inactive', updated_at = ? WHERE id = ?").run(
        ctx.now(),
        row.id,
      );
      audit(ctx, actor, 'channel.unassign', 'channel', row.id, { type: row.type, sender: row.sender });
      return { ...row, status: 'inactive' as const };
    })
    .immediate();
}

/** A channel with the name, kind and status of its gateway, as the lists show it. */
export type ChannelWithGateway = Channel & {
  gateway_name: Row<typeof gateways>['name'];
  gateway_kind: Row<typeof gateways>['kind'];
  gateway_status: Row<typeof gateways>['status'];
};

export function listChannels(
  ctx: CoreCtx,
  opts: { partner?: string; includeInactive?: boolean } = {},
): ChannelWithGateway[] {
  const where: string[] = [];
  const params: string[] = [];
  if (opts.partner) (where.push('c.partner_id = ?'), params.push(getPartner(ctx, opts.partner).id));
  if (!opts.includeInactive) where.push("c.status = 'active'");
  return stmt<string[], ChannelWithGateway>(
    ctx.db.sqlite,
    `SELECT c.*, g.name AS gateway_name, g.kind AS gateway_kind, g.status AS gateway_status
     FROM channels c JOIN gateways g ON g.id = c.gateway_id
     ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
     ORDER BY c.partner_id, c.type`,
  ).all(...params);
}

export function channelJson(c: Channel | ChannelWithGateway) {
  const g = c as Partial<ChannelWithGateway>;
  return {
    id: c.id,
    partner_id: c.partner_id,
    type: c.type,
    sender: c.sender,
    status: c.status,
    gateway:
      g.gateway_name !== undefined
        ? { id: c.gateway_id, name: g.gateway_name, kind: g.gateway_kind }
        : { id: c.gateway_id },
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  };
}
