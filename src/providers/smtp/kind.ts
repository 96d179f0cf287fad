import { z } from 'zod';
import type { GatewayKindSpec } from '../../core/gateway-kinds.js';
import { bool, int, rate } from '../kind-fields.js';

export const smtpSettings = z
  .object({
    host: z.string().min(1),
    /** Default: 465 with secure, else 587. */
    port: int(1, 65535).optional(),
    /** true: TLS from the first byte (port 465); false: STARTTLS when offered. */
    secure: bool.default(false),
    require_tls: bool.default(false),
    tls_reject_unauthorized: bool.default(true),
    user: z.string().optional(),
    rate_per_second: rate,
  })
  .strict();

export type SmtpSettings = z.output<typeof smtpSettings>;

export const smtpKind: GatewayKindSpec = {
  kind: 'smtp',
  label: 'SMTP relay',
  channels: ['email'],
  settings: smtpSettings,
  secrets: { required: [], optional: ['password'] },
  // A password without a user is never sent. (A user without a password is sent no AUTH by a
  // relay that offers none, and meets a 535 at one that does: nodemailer logs in only when offered.)
  pairs: [{ setting: 'user', secret: 'password', needs: 'setting' }],
};
