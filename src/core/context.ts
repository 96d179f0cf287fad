import type { Config } from '../config/schema.js';
import type { Db } from '../db/open.js';
import type { Store } from '../db/query.js';
import type { GatewayKindRegistry } from './gateway-kinds.js';

/** What every core function receives: the store, the master key, config, a clock and the gateway kinds. */
export interface CoreCtx {
  db: Db;
  /** The store core's converted modules query through (src/db/query.ts): SQLite's over `db`, or PostgreSQL's. */
  store: Store;
  masterKey: Buffer;
  config: Config;
  now(): number;
  /** The provider accounts msgd can hold: src/providers/kinds.ts, given by whoever builds the context. */
  gatewayKinds: GatewayKindRegistry;
}

export { CHANNEL_TYPES, type ChannelType } from '../lib/channel-types.js';
export type { GatewayKind } from './gateway-kinds.js';
