import { stmt } from '../db/stmt.js';
import { parseMoney } from '../lib/money.js';
import { assignChannel } from './channels.js';
import type { CoreCtx } from './context.js';
import { addGateway } from './gateways.js';
import { topup } from './ledger.js';
import { createPartner } from './partners.js';
import { setPrice } from './prices.js';
import { issueToken } from './tokens.js';
import { iso } from '../lib/time.js';

// First start on an empty data directory: a demo partner on a sandbox gateway for every
// channel, so a new user can send at once and watch queued -> sent -> delivered. Runs at
// most once per data directory, never when the operator has created partners.

export const DEMO_SEEDED_KEY = 'demo_seeded_at';

export interface DemoSeed {
  partnerSlug: string;
  token: string;
  gatewayName: string;
}

export function maybeSeedDemo(ctx: CoreCtx): DemoSeed | null {
  return ctx.db.sqlite
    .transaction(() => {
      const seeded = stmt<[string], { value: string }>(ctx.db.sqlite, 'SELECT value FROM meta WHERE key = ?').get(
        DEMO_SEEDED_KEY,
      );
      const partners = stmt<[], { n: number }>(ctx.db.sqlite, 'SELECT COUNT(*) AS n FROM partners').get()!;
      if (seeded || partners.n > 0) return null;
      const actor = 'system:demo';
      const partner = createPartner(ctx, { slug: 'demo', name: 'Demo partner (sandbox)' }, actor);
      const gw = addGateway(ctx, { kind: 'sandbox', name: 'sandbox', settings: {} }, actor);
      const senders: Record<string, string> = {
        sms: '+15550000001',
        whatsapp: '+15550000002',
        email: 'demo@sandbox.msgd.local',
        messenger: '100000000000001',
        instagram: '100000000000002',
      };
      for (const [type, sender] of Object.entries(senders)) {
        assignChannel(ctx, { partner: partner.id, gateway: gw.id, type, sender }, actor);
      }
      setPrice(ctx, { channel: 'sms', amount: parseMoney('0.0075'), partner: partner.id }, actor);
      topup(ctx, partner.id, parseMoney('10.00'), 'demo credit', actor);
      const { secret } = issueToken(ctx, { partner: partner.id, name: 'demo', scopes: '*' }, actor);
      stmt(ctx.db.sqlite, 'INSERT INTO meta (key, value) VALUES (?, ?)').run(DEMO_SEEDED_KEY, iso(ctx.now()));
      return { partnerSlug: partner.slug, token: secret, gatewayName: gw.name };
    })
    .immediate();
}
