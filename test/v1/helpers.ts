import type { CoreCtx } from '../../src/core/context.js';
import { findOrCreateContact } from '../../src/core/contacts.js';
import { touchConversation } from '../../src/core/conversations.js';
import { connect, setupPartner, startTestServer, type PartnerSetup, type TestServer } from '../helpers/server.js';

export interface Res {
  status: number;
  body: any;
  headers: Headers;
  text: string;
}

/** One request to the server; `body` as a string is sent as is (malformed JSON tests). */
export async function call(
  server: { url: string },
  method: string,
  path: string,
  opts: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Res> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await fetch(server.url + path, {
    method,
    headers,
    body: opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body),
  });
  const text = await res.text();
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, body, headers: res.headers, text };
}

export const SENDERS = (n: number) => ({
  sms: `+1555010${String(n).padStart(4, '0')}`,
  whatsapp: `+1555020${String(n).padStart(4, '0')}`,
  email: `p${n}@sender.example.com`,
  messenger: `10${n}000`,
  instagram: `20${n}000`,
});

/** A funded partner with a sandbox gateway on every channel type. */
export async function richPartner(
  ctx: CoreCtx,
  n: number,
  opts: { scopes?: string; balance?: string } = {},
): Promise<PartnerSetup> {
  const p = await setupPartner(ctx, {
    balance: opts.balance ?? '100',
    scopes: opts.scopes,
    prices: { sms: '0.01', whatsapp: '0.02', email: '0.001', messenger: '0.005', instagram: '0.005' },
  });
  for (const [type, sender] of Object.entries(SENDERS(n))) {
    await connect(ctx, p.partnerId, { kind: 'sandbox', settings: { delivery_delay_ms: 50 } }, type, sender);
  }
  return p;
}

/** Bulk conversations straight through core, as inbound/outbound traffic would make them. */
export function seedConversations(
  ctx: CoreCtx,
  partnerId: string,
  count: number,
  opts: { channel?: 'sms' | 'email'; prefix?: string } = {},
) {
  const ids: string[] = [];
  ctx.db.sqlite.transaction(() => {
    for (let i = 0; i < count; i++) {
      const channel = opts.channel ?? (i % 3 === 0 ? 'email' : 'sms');
      const addr =
        channel === 'email'
          ? `${opts.prefix ?? 'c'}${i}@example.org`
          : `+1415${(opts.prefix ? 7 : 6).toString()}${String(i).padStart(6, '0')}`;
      const { contact } = findOrCreateContact(ctx, partnerId, channel, addr);
      ids.push(touchConversation(ctx, partnerId, contact.id, channel, null).id);
    }
  })();
  return ids;
}

export async function startV1(overrides: Record<string, unknown> = {}): Promise<TestServer> {
  return startTestServer({ 'log.level': 'warn', ...overrides });
}
