import { sql } from '../db/sql.js';
import { parseMoney } from '../lib/money.js';
import { assignChannelIn } from './channels.js';
import type { CoreCtx } from './context.js';
import { addGatewayIn } from './gateways.js';
import { topupIn } from './ledger.js';
import { createPartnerIn } from './partners.js';
import { setPriceIn } from './prices.js';
import { issueTokenIn } from './tokens.js';
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

/** One store transaction: the partner, its gateway, channels, price, credit and token, or nothing. */
export async function maybeSeedDemo(ctx: CoreCtx): Promise<DemoSeed | null> {
  return ctx.store.transaction(async (tx) => {
    const seeded = await tx.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = ${DEMO_SEEDED_KEY}`);
    const partners = await tx.get<{ n: number }>(sql`SELECT COUNT(*) AS n FROM partners`);
    if (seeded || Number(partners?.n) > 0) return null;
    const actor = 'system:demo';
    const partner = await createPartnerIn(ctx, tx, { slug: 'demo', name: 'Demo partner (sandbox)' }, actor);
    const gw = await addGatewayIn(ctx, tx, { kind: 'sandbox', name: 'sandbox', settings: {} }, actor);
    const senders: Record<string, string> = {
      sms: '+15550000001',
      whatsapp: '+15550000002',
      email: 'demo@sandbox.msgd.local',
      messenger: '100000000000001',
      instagram: '100000000000002',
    };
    for (const [type, sender] of Object.entries(senders)) {
      await assignChannelIn(ctx, tx, { partner: partner.id, gateway: gw.id, type, sender }, actor);
    }
    await setPriceIn(ctx, tx, { channel: 'sms', amount: parseMoney('0.0075'), partner: partner.id }, actor);
    await topupIn(ctx, tx, partner.id, parseMoney('10.00'), 'demo credit', actor);
    const { secret } = await issueTokenIn(ctx, tx, { partner: partner.id, name: 'demo', scopes: '*' }, actor);
    await tx.run(sql`INSERT INTO meta (key, value) VALUES (${DEMO_SEEDED_KEY}, ${iso(ctx.now())})`);
    return { partnerSlug: partner.slug, token: secret, gatewayName: gw.name };
  });
}
