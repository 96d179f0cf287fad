import { createHash } from 'node:crypto';
import type { NodemailerError, SendMailOptions } from 'nodemailer';
import type { GatewayRuntime, ProviderAdapter, SendContext, SendResult } from '../types.js';
import { unsupported } from '../send-results.js';
import { classifySmtpError } from './classify.js';
import type { SmtpSettings } from './kind.js';

type Nodemailer = typeof import('nodemailer');
type PoolTransport = ReturnType<typeof createPool>;

// nodemailer is loaded with the first SMTP send, not with msgd: most installations send no
// email through SMTP, and loading it costs 6.5 MB of resident memory.
let mailer: Promise<Nodemailer> | null = null;
const loadMailer = () => (mailer ??= import('nodemailer'));

// One pooled transport per gateway, so SMTP sessions are reused across messages; the
// hash retires the pool when the operator changes settings or the password.
const pools = new Map<string, { hash: string; transport: PoolTransport }>();

function bool(v: unknown, fallback: boolean): boolean {
  if (typeof v === 'boolean') return v;
  if (v === 'true' || v === '1' || v === 1) return true;
  if (v === 'false' || v === '0' || v === 0) return false;
  return fallback;
}

/** SMTP sessions a gateway keeps open at most: its own pool, shared with no other gateway. */
const SMTP_CONNECTIONS = 5;

function createPool(nodemailer: Nodemailer, gw: GatewayRuntime<SmtpSettings>, timeoutMs: number) {
  const s = gw.settings;
  const user = s.user || undefined;
  return nodemailer.createTransport({
    pool: true,
    host: s.host,
    port: Number(s.port ?? (bool(s.secure, false) ? 465 : 587)),
    secure: bool(s.secure, false),
    requireTLS: bool(s.require_tls, false),
    tls: { rejectUnauthorized: bool(s.tls_reject_unauthorized, true) },
    auth: user ? { user, pass: gw.secrets.password ?? '' } : undefined,
    maxConnections: SMTP_CONNECTIONS,
    // Connecting, the greeting and a STARTTLS upgrade share one deadline (connectionTimeout).
    // The idle-socket timer runs from the connect too: a second longer, so a relay that never
    // greets is reported as such (nothing sent) and not as an idle session (mail maybe sent).
    connectionTimeout: timeoutMs,
    greetingTimeout: timeoutMs,
    socketTimeout: timeoutMs + 1000,
  });
}

async function poolFor(gw: GatewayRuntime<SmtpSettings>, ctx: SendContext): Promise<PoolTransport> {
  const nodemailer = await loadMailer();
  const hash = createHash('sha256')
    .update(JSON.stringify([gw.settings, gw.secrets.password ?? null, ctx.timeoutMs]))
    .digest('hex');
  const cached = pools.get(gw.id);
  if (cached && cached.hash === hash) return cached.transport;
  cached?.transport.close();
  const transport = createPool(nodemailer, gw, ctx.timeoutMs);
  pools.set(gw.id, { hash, transport });
  return transport;
}

function domainOf(address: string): string {
  const at = address.lastIndexOf('@');
  const domain = at >= 0 ? address.slice(at + 1).trim() : '';
  return /^[a-zA-Z0-9.-]+$/.test(domain) ? domain : 'msgd.invalid';
}

export const smtpAdapter: ProviderAdapter<SmtpSettings> = {
  kind: 'smtp',
  callPool: (gw) => ({ key: `smtp:${gw.id}`, size: SMTP_CONNECTIONS }),
  async send(gw, msg, ctx): Promise<SendResult> {
    const c = msg.content;
    if (c.kind !== 'email') return unsupported('SMTP', c.kind);
    const mail: SendMailOptions = {
      from: c.fromName ? { name: c.fromName, address: msg.from } : msg.from,
      to: msg.to,
      subject: c.subject,
      text: c.text,
      html: c.html,
      replyTo: c.replyTo,
      headers: { 'X-Msgd-Message-Id': msg.id },
      // The same Message-ID on every attempt: a resend after a timeout that did reach the
      // server is then the same message to the receiving side, which can drop the duplicate.
      messageId: `<${msg.id}@${domainOf(msg.from)}>`,
    };
    try {
      const info = await (await poolFor(gw, ctx)).sendMail(mail);
      const rejected = info.rejected ?? [];
      if (rejected.length > 0) {
        return {
          outcome: 'failed',
          code: 'smtp_rejected',
          message: `recipient refused: ${info.response ?? ''}`.trim(),
        };
      }
      // No provider reports come back over SMTP, and the Message-ID is built from msgd's id.
      return { outcome: 'accepted', providerMessageId: info.messageId, namedInReports: true };
    } catch (err) {
      return classifySmtpError(err as NodemailerError);
    }
  },
  async close() {
    for (const { transport } of pools.values()) transport.close();
    pools.clear();
  },
};
