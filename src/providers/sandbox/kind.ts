import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { GatewayKindSpec } from '../../core/gateway-kinds.js';
import { CHANNEL_TYPES } from '../../lib/channel-types.js';
import { int, rate } from '../kind-fields.js';

export const sandboxSettings = z
  .object({
    delivery_delay_ms: int(0, 600_000).default(300),
    rate_per_second: rate,
  })
  .strict();

export type SandboxSettings = z.output<typeof sandboxSettings>;

export const sandboxKind: GatewayKindSpec = {
  kind: 'sandbox',
  label: 'Sandbox (no provider: accepts and reports delivered)',
  channels: CHANNEL_TYPES,
  settings: sandboxSettings,
  secrets: { required: [], optional: ['signing_secret'] },
  // Signs the sandbox's own delivery reports (src/providers/sandbox/report.ts).
  generatedSecrets: { signing_secret: () => randomBytes(32).toString('base64url') },
};
