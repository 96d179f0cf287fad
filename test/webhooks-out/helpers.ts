import type { CoreCtx } from '../../src/core/context.js';
import { createInboundIn } from '../../src/core/messages.js';
import { sql } from '../../src/db/sql.js';
import { connect, setupPartner, startTestServer, type PartnerSetup, type TestServer } from '../helpers/server.js';
import { makeCert, startReceiver, type Receiver, type TlsFiles } from '../helpers/webhook-receiver.js';

export interface Api {
  (
    method: string,
    path: string,
    body?: unknown,
    token?: string,
  ): Promise<{ status: number; body: any; headers: Headers }>;
}

export function apiFor(server: { url: string }, defaultToken: string): Api {
  return async (method, path, body, token = defaultToken) => {
    const res = await fetch(server.url + path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
  };
}

/** Small retry delays so a whole schedule runs in a test: immediately, then 100-400 ms. */
export const FAST_SCHEDULE = [0, 100, 200, 300, 400];

export function outOverrides(tls: TlsFiles, extra: Record<string, unknown> = {}) {
  return {
    'webhooksOut.caFile': tls.cert,
    'webhooksOut.allowPrivateTargets': true,
    'webhooksOut.timeoutMs': 1000,
    'webhooksOut.retryScheduleMs': FAST_SCHEDULE,
    ...extra,
  };
}

export interface World {
  tls: TlsFiles;
  server: TestServer;
  receiver: Receiver;
  partner: PartnerSetup;
  channel: { id: string; type: 'sms'; gatewayId: string; sender: string };
  api: Api;
  /** Register the receiver as an endpoint; its secret is handed to the receiver. */
  register(opts?: { events?: string[]; url?: string }): Promise<{ id: string; secret: string }>;
  close(): Promise<void>;
}

export async function world(extra: Record<string, unknown> = {}, opts: { tls?: TlsFiles } = {}): Promise<World> {
  const tls = opts.tls ?? makeCert();
  const server = await startTestServer(outOverrides(tls, extra));
  const receiver = await startReceiver(tls);
  const partner = await setupPartner(server.ctx, { balance: '100', prices: { sms: '0.01' } });
  const { channel } = await connect(server.ctx, partner.partnerId, { kind: 'sandbox' }, 'sms', '+15550001111');
  const api = apiFor(server, partner.token);
  const secrets: string[] = [];
  return {
    tls,
    server,
    receiver,
    partner,
    channel: { id: channel.id, type: 'sms', gatewayId: channel.gateway_id, sender: channel.sender },
    api,
    async register(o = {}) {
      const r = await api('POST', '/v1/webhooks', {
        url: o.url ?? receiver.url,
        ...(o.events ? { events: o.events } : {}),
      });
      if (r.status !== 201) throw new Error(`register: ${r.status} ${JSON.stringify(r.body)}`);
      secrets.push(r.body.secret);
      receiver.setSecrets([...secrets]);
      return { id: r.body.id, secret: r.body.secret };
    },
    async close() {
      await receiver.close();
      await server.stop();
      if (!opts.tls) tls.cleanup();
    },
  };
}

/** An inbound SMS as the provider path stores it (core createInboundIn, one transaction). */
export async function inbound(ctx: CoreCtx, partnerId: string, channel: World['channel'], from: string, text: string) {
  return ctx.store.transaction((tx) =>
    createInboundIn(tx, ctx, {
      partnerId,
      channel,
      from,
      profileName: 'Alice',
      providerMessageId: `prov_${Math.random().toString(36).slice(2)}`,
      content: { kind: 'text', text },
      occurredAt: ctx.now(),
    }),
  );
}

export function deliveryRows(ctx: CoreCtx, endpointId?: string): Promise<any[]> {
  return ctx.store.all(
    sql`SELECT * FROM webhook_deliveries ${endpointId ? sql`WHERE endpoint_id = ${endpointId}` : sql``} ORDER BY id`,
  );
}

export function attemptRows(ctx: CoreCtx, deliveryId: string): Promise<any[]> {
  return ctx.store.all(sql`SELECT * FROM webhook_attempts WHERE delivery_id = ${deliveryId} ORDER BY id`);
}
