import type { Row } from '../db/rows.js';
import type { gateways } from '../db/schema.js';
import type { Queryable } from '../db/query.js';
import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { notFound } from '../lib/errors.js';
import type { CoreCtx, GatewayKind } from './context.js';
import { unsealJson } from './secrets.js';

// The one door to a gateway's opened secrets. Only the provider layer (src/providers,
// and the dispatch/webhook code that hands gateways to it) may call this; nothing it
// returns is ever logged, stored elsewhere or sent in a response.

export interface GatewayWithSecrets {
  id: string;
  kind: GatewayKind;
  name: string;
  status: 'active' | 'disabled';
  settings: Record<string, any>;
  secrets: Record<string, string>;
  updatedAt: number;
}

function opened(ctx: CoreCtx, row: Row<typeof gateways>): GatewayWithSecrets {
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    status: row.status,
    settings: JSON.parse(row.settings),
    secrets: unsealJson(ctx.masterKey, row.secrets),
    updatedAt: row.updated_at,
  };
}

/**
 * On the connection: the gateway book (src/jobs/gateway-book.ts) opens gateways synchronously
 * for dispatch and the webhook path. openGatewayIn is the form on either store.
 */
export function openGateway(ctx: CoreCtx, id: string): GatewayWithSecrets {
  const row = stmt<[string], Row<typeof gateways>>(ctx.db.sqlite, 'SELECT * FROM gateways WHERE id = ?').get(id);
  if (!row) throw notFound('gateway', id);
  return opened(ctx, row);
}

/** On the connection, as openGateway; openGatewaysOfKindIn is the form on either store. */
export function openGatewaysOfKind(ctx: CoreCtx, kinds: GatewayKind[]): GatewayWithSecrets[] {
  const rows = stmt<[], Pick<Row<typeof gateways>, 'id' | 'kind'>>(
    ctx.db.sqlite,
    'SELECT id, kind FROM gateways',
  ).all();
  return rows.filter((r) => kinds.includes(r.kind)).map((r) => openGateway(ctx, r.id));
}

/** A gateway with its secrets opened, read in `q` (a caller's transaction, or the store). */
export async function openGatewayIn(ctx: CoreCtx, id: string, q: Queryable = ctx.store): Promise<GatewayWithSecrets> {
  const row = await q.get<Row<typeof gateways>>(sql`SELECT * FROM gateways WHERE id = ${id}`);
  if (!row) throw notFound('gateway', id);
  return opened(ctx, row);
}

/** Every gateway of these kinds, its secrets opened, by id. */
export async function openGatewaysOfKindIn(ctx: CoreCtx, kinds: GatewayKind[]): Promise<GatewayWithSecrets[]> {
  const rows = await ctx.store.all<Row<typeof gateways>>(sql`SELECT * FROM gateways ORDER BY id`);
  return rows.filter((r) => kinds.includes(r.kind)).map((r) => opened(ctx, r));
}
