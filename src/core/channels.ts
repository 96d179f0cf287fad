import type { Row } from '../db/rows.js';
import type { channels, gateways } from '../db/schema.js';
import type { Queryable, Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { AppError, invalid, notFound } from '../lib/errors.js';
import { isEmail } from '../lib/email.js';
import { newId } from '../lib/ids.js';
import { normalizeSenderE164 } from '../lib/phone.js';
import { iso } from '../lib/time.js';
import { CHANNEL_TYPES, type ChannelType, type CoreCtx } from './context.js';
import { auditIn } from './audit.js';
import { getGatewayRow } from './gateways.js';
import { readPartner } from './partners.js';

export type Channel = Row<typeof channels>;

/** A partner's primary channel of a type: the one the send path picks (position 0). */
const activeOfPartner = (q: Queryable, partnerId: string, type: string) =>
  q.get<Channel>(
    sql`SELECT * FROM channels WHERE partner_id = ${partnerId} AND type = ${type} AND status = 'active' AND position = 0`,
  );

/**
 * The channel types whose messages may move to a fallback gateway. Messenger and Instagram
 * recipients are page- or account-scoped ids that mean nothing on another page, and a WhatsApp
 * conversation's window and templates belong to one number: those channels have one route.
 */
export const FAILOVER_TYPES: readonly ChannelType[] = ['sms', 'email'];

/** Refuses a sender another partner's active channel uses (a partner may reuse its own on a fallback). */
async function assertSenderFree(tx: Queryable, type: ChannelType, sender: string, partnerId: string) {
  const taken = await tx.get<Channel>(
    sql`SELECT * FROM channels WHERE type = ${type} AND sender = ${sender} AND status = 'active' AND partner_id <> ${partnerId}
        ORDER BY id LIMIT 1`,
  );
  if (taken)
    throw new AppError('conflict', `${type} sender ${sender} is already assigned to another partner (${taken.id})`);
}

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
  input: Parameters<typeof assignChannelIn>[2],
  actor: string,
): Promise<Channel> {
  return ctx.store.transaction((tx) => assignChannelIn(ctx, tx, input, actor));
}

/** assignChannel, inside the caller's store transaction. */
export async function assignChannelIn(
  ctx: CoreCtx,
  tx: Tx,
  input: { partner: string; gateway: string; type: string; sender?: string },
  actor: string,
): Promise<Channel> {
  if (!isChannelType(input.type)) {
    throw invalid(`unknown channel type "${input.type}"`, [
      { field: 'type', message: `one of ${CHANNEL_TYPES.join(', ')}` },
    ]);
  }
  const type = input.type;
  const partner = await readPartner(tx, input.partner);
  const gw = await getGatewayRow(ctx, input.gateway, tx);
  const spec = ctx.gatewayKinds.get(gw.kind);
  if (!spec.channels.includes(type)) {
    throw invalid(`a ${gw.kind} gateway cannot serve ${type}; it serves ${spec.channels.join(', ')}`);
  }
  const raw = input.sender ?? spec.defaultSender?.(type, JSON.parse(gw.settings));
  if (!raw)
    throw invalid(`the sender address is required for a ${type} channel`, [{ field: 'from', message: 'required' }]);
  const sender = normalizeSender(type, raw);
  const mine = await activeOfPartner(tx, partner.id, type);
  if (mine) {
    throw new AppError(
      'conflict',
      `partner "${partner.slug}" already has an active ${type} channel (${mine.id}); unassign it first`,
    );
  }
  await assertSenderFree(tx, type, sender, partner.id);
  const row = await insertChannel(ctx, tx, { partner_id: partner.id, gateway_id: gw.id, type, sender, position: 0 });
  await auditIn(ctx, tx, actor, 'channel.assign', 'channel', row.id, {
    partner: partner.slug,
    gateway: gw.name,
    type,
    sender,
  });
  return row;
}

async function insertChannel(
  ctx: CoreCtx,
  tx: Queryable,
  input: Pick<Channel, 'partner_id' | 'gateway_id' | 'type' | 'sender' | 'position'>,
): Promise<Channel> {
  const now = ctx.now();
  const row: Channel = { id: newId('ch'), ...input, status: 'active', created_at: now, updated_at: now };
  await tx.run(
    sql`INSERT INTO channels (id, partner_id, gateway_id, type, sender, status, position, created_at, updated_at)
        VALUES (${row.id}, ${row.partner_id}, ${row.gateway_id}, ${row.type}, ${row.sender}, ${row.status}, ${row.position},
          ${row.created_at}, ${row.updated_at})`,
  );
  return row;
}

/**
 * A partner's active channels of a type in their order: the primary first, then the fallbacks.
 * Synchronous: dispatch's failover reads it inside the batch's apply (src/core/routes.ts);
 * routeOrderIn is the same read through the store.
 */
export function routeOrder(ctx: CoreCtx, partnerId: string, type: ChannelType): ChannelWithGateway[] {
  return stmt<[string, string], ChannelWithGateway>(
    ctx.db.sqlite,
    `SELECT c.*, g.name AS gateway_name, g.kind AS gateway_kind, g.status AS gateway_status
       FROM channels c JOIN gateways g ON g.id = c.gateway_id
      WHERE c.partner_id = ? AND c.type = ? AND c.status = 'active' ORDER BY c.position`,
  ).all(partnerId, type);
}

/** routeOrder, read in `q` (the store, or the caller's transaction). */
export function routeOrderIn(q: Queryable, partnerId: string, type: ChannelType): Promise<ChannelWithGateway[]> {
  return q.all<ChannelWithGateway>(
    sql`SELECT c.*, g.name AS gateway_name, g.kind AS gateway_kind, g.status AS gateway_status
          FROM channels c JOIN gateways g ON g.id = c.gateway_id
         WHERE c.partner_id = ${partnerId} AND c.type = ${type} AND c.status = 'active' ORDER BY c.position, c.id`,
  );
}

function failoverType(type: string): ChannelType {
  if (!isChannelType(type))
    throw invalid(`unknown channel type "${type}"`, [{ field: 'type', message: `one of ${CHANNEL_TYPES.join(', ')}` }]);
  if (!FAILOVER_TYPES.includes(type))
    throw invalid(
      `${type} channels have one gateway: ${type === 'whatsapp' ? "a WhatsApp conversation's window and templates belong to one number" : 'recipients are ids scoped to one page or account'}; fallbacks are for ${FAILOVER_TYPES.join(' and ')}`,
      [{ field: 'type', message: FAILOVER_TYPES.join(' or ') }],
    );
  return type;
}

/**
 * Add a fallback gateway at the end of a partner's order for SMS or email. Its sender defaults
 * to the primary's (one number or address on two providers). A gateway is in an order once.
 */
export async function addFallback(
  ctx: CoreCtx,
  input: { partner: string; type: string; gateway: string; sender?: string },
  actor: string,
): Promise<Channel> {
  const type = failoverType(input.type);
  return ctx.store.transaction(async (tx) => {
    const partner = await readPartner(tx, input.partner);
    const gw = await getGatewayRow(ctx, input.gateway, tx);
    const spec = ctx.gatewayKinds.get(gw.kind);
    if (!spec.channels.includes(type))
      throw invalid(`a ${gw.kind} gateway cannot serve ${type}; it serves ${spec.channels.join(', ')}`);
    const order = await routeOrderIn(tx, partner.id, type);
    if (order.length === 0)
      throw new AppError(
        'conflict',
        `partner "${partner.slug}" has no ${type} channel; assign its primary gateway first (msgctl channel assign)`,
      );
    const already = order.find((c) => c.gateway_id === gw.id);
    if (already)
      throw new AppError(
        'conflict',
        `gateway ${gw.name} is already ${already.position === 0 ? 'the primary' : `fallback ${already.position}`} of ${partner.slug}'s ${type}`,
      );
    const sender = normalizeSender(type, input.sender ?? order[0].sender);
    await assertSenderFree(tx, type, sender, partner.id);
    const position = order[order.length - 1].position + 1;
    const row = await insertChannel(ctx, tx, { partner_id: partner.id, gateway_id: gw.id, type, sender, position });
    await auditIn(ctx, tx, actor, 'channel.fallback_add', 'channel', row.id, {
      partner: partner.slug,
      gateway: gw.name,
      type,
      sender,
      position,
    });
    return row;
  });
}

/** Close the gap an unassigned channel left in its partner's order, keeping the others' order. */
async function closeGap(ctx: CoreCtx, tx: Queryable, partnerId: string, type: string) {
  const rest = await tx.all<Pick<Channel, 'id' | 'position'>>(
    sql`SELECT id, position FROM channels WHERE partner_id = ${partnerId} AND type = ${type} AND status = 'active'
        ORDER BY position, id`,
  );
  // One row at a time, lowest first: each moves into a place already free.
  for (const [i, c] of rest.entries()) {
    if (c.position !== i)
      await tx.run(sql`UPDATE channels SET position = ${i}, updated_at = ${ctx.now()} WHERE id = ${c.id}`);
  }
}

/** Remove a fallback gateway from a partner's order (the primary is removed with channel unassign). */
export async function removeFallback(
  ctx: CoreCtx,
  input: { partner: string; type: string; gateway: string },
  actor: string,
): Promise<Channel> {
  const type = failoverType(input.type);
  return ctx.store.transaction(async (tx) => {
    const partner = await readPartner(tx, input.partner);
    const gw = await getGatewayRow(ctx, input.gateway, tx);
    const row = (await routeOrderIn(tx, partner.id, type)).find((c) => c.gateway_id === gw.id);
    if (!row) throw notFound(`${type} fallback`, `${gw.name} of ${partner.slug}`);
    if (row.position === 0)
      throw new AppError(
        'conflict',
        `gateway ${gw.name} is the primary of ${partner.slug}'s ${type}; unassign the channel instead (msgctl channel unassign)`,
      );
    await tx.run(sql`UPDATE channels SET status = 'inactive', updated_at = ${ctx.now()} WHERE id = ${row.id}`);
    await closeGap(ctx, tx, partner.id, type);
    await auditIn(ctx, tx, actor, 'channel.fallback_remove', 'channel', row.id, {
      partner: partner.slug,
      gateway: gw.name,
      type,
    });
    const { gateway_name: _n, gateway_kind: _k, gateway_status: _s, ...channel } = row;
    return { ...channel, status: 'inactive' as const };
  });
}

/** Unassign by channel id, or by partner + type. */
export async function unassignChannel(
  ctx: CoreCtx,
  input: { channel?: string; partner?: string; type?: string },
  actor: string,
): Promise<Channel> {
  return ctx.store.transaction(async (tx) => {
    let row: Channel | undefined;
    if (input.channel) {
      row = await tx.get<Channel>(sql`SELECT * FROM channels WHERE id = ${input.channel}`);
    } else if (input.partner && input.type) {
      const partner = await readPartner(tx, input.partner);
      row = await activeOfPartner(tx, partner.id, input.type);
    }
    if (!row) throw notFound('active channel', input.channel ?? `${input.partner} ${input.type}`);
    if (row.status !== 'active') throw new AppError('conflict', `channel ${row.id} is already unassigned`);
    await tx.run(sql`UPDATE channels SET status = 'inactive', updated_at = ${ctx.now()} WHERE id = ${row.id}`);
    // Unassigning the primary makes its first fallback the primary; its sender must then be free.
    await closeGap(ctx, tx, row.partner_id, row.type);
    await auditIn(ctx, tx, actor, 'channel.unassign', 'channel', row.id, { type: row.type, sender: row.sender });
    return { ...row, status: 'inactive' as const };
  });
}

/** A channel with the name, kind and status of its gateway, as the lists show it. */
export type ChannelWithGateway = Channel & {
  gateway_name: Row<typeof gateways>['name'];
  gateway_kind: Row<typeof gateways>['kind'];
  gateway_status: Row<typeof gateways>['status'];
};

export async function listChannels(
  ctx: CoreCtx,
  opts: { partner?: string; includeInactive?: boolean } = {},
): Promise<ChannelWithGateway[]> {
  const partnerId = opts.partner ? (await readPartner(ctx.store, opts.partner)).id : null;
  return ctx.store.all<ChannelWithGateway>(
    sql`SELECT c.*, g.name AS gateway_name, g.kind AS gateway_kind, g.status AS gateway_status
          FROM channels c JOIN gateways g ON g.id = c.gateway_id
         WHERE 1 = 1 ${partnerId ? sql`AND c.partner_id = ${partnerId}` : sql``}
           ${opts.includeInactive ? sql`` : sql`AND c.status = 'active'`}
         ORDER BY c.partner_id, c.type, c.position, c.id`,
  );
}

export function channelJson(c: Channel | ChannelWithGateway) {
  const g = c as Partial<ChannelWithGateway>;
  return {
    id: c.id,
    partner_id: c.partner_id,
    type: c.type,
    sender: c.sender,
    status: c.status,
    // 0: the primary, which sends first; 1, 2, …: the fallbacks in the order they are tried.
    position: c.position,
    role: c.position === 0 ? ('primary' as const) : ('fallback' as const),
    gateway:
      g.gateway_name !== undefined
        ? { id: c.gateway_id, name: g.gateway_name, kind: g.gateway_kind }
        : { id: c.gateway_id },
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
  };
}
