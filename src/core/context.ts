import type { Config } from '../config/schema.js';
import type { Db } from '../db/open.js';

/** What every core function receives: the store, the master key, config and a clock. */
export interface CoreCtx {
  db: Db;
  masterKey: Buffer;
  config: Config;
  now(): number;
}

export { CHANNEL_TYPES, type ChannelType } from '../lib/channel-types.js';

export type GatewayKind =
  'whatsapp_cloud' | 'meta_messenger' | 'meta_instagram' | 'twilio' | 'sendgrid' | 'smtp' | 'sandbox';
