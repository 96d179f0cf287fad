import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint } from '../../src/core/endpoints.js';
import { sql } from '../../src/db/sql.js';
import { forbiddenReason } from '../../src/webhooks-out/ssrf.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { makeCert, startReceiver, type Receiver, type TlsFiles } from '../helpers/webhook-receiver.js';
import { apiFor, attemptRows, deliveryRows, inbound } from './helpers.js';

// Partner URLs must not reach msgd's own network. Refused at registration (resolving the
// host), and again at connection time against the address actually dialled.

describe('address classification', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.5.4', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'cloud metadata'],
    ['169.254.1.1', 'link-local'],
    ['100.64.0.1', 'shared address space (CGNAT)'],
    ['0.0.0.0', 'unspecified ("this network")'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fd00::1', 'unique local (private)'],
    ['fd00:ec2::254', 'unique local (private)'],
    ['fe80::1', 'link-local'],
    ['::ffff:127.0.0.1', 'loopback (IPv4 inside IPv6)'],
    ['::ffff:a9fe:a9fe', 'cloud metadata (IPv4 inside IPv6)'],
    ['64:ff9b::a00:1', 'private (IPv4 inside IPv6)'],
    ['2002:c0a8:0101::1', 'private (IPv4 inside IPv6)'],
    // RFC 6145 IPv4-translated addresses, inside the IETF-reserved ::/8.
    ['::ffff:0:7f00:1', 'loopback (IPv4 inside IPv6)'],
    ['::ffff:0:10.1.2.3', 'private (IPv4 inside IPv6)'],
    ['::ffff:0:a9fe:a9fe', 'cloud metadata (IPv4 inside IPv6)'],
    ['::7f00:1', 'reserved (outside global unicast 2000::/3)'],
    ['1::1', 'reserved (outside global unicast 2000::/3)'],
    ['5f00::1', 'segment routing (SRv6)'],
    ['3fff::1', 'reserved'],
    ['3fff:fff::1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['64:ff9b:1::a00:1', 'local-use NAT64'],
    ['100::1', 'discard-only'],
    ['fec0::1', 'site-local'],
    ['2001:2::1', 'benchmarking'],
    ['192.0.2.1', 'reserved'],
    ['fe80::1%eth0', 'link-local'],
  ])('%s is refused as %s', (ip, why) => {
    expect(forbiddenReason(ip)).toBe(why);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '2002:0808:0808::1',
    '::ffff:0:8.8.8.8',
    '64:ff9b::808:808',
    '3fff:1000::1',
    '2a00:1450:4001::1',
  ])('%s is public', (ip) => {
    expect(forbiddenReason(ip)).toBeNull();
  });
});

describe('with private targets refused (the default)', () => {
  let tls: TlsFiles;
  let server: TestServer;
  let receiver: Receiver;
  let api: ReturnType<typeof apiFor>;
  let partnerId: string;
  let channel: any;

  beforeAll(async () => {
    tls = makeCert();
    server = await startTestServer({
      'webhooksOut.caFile': tls.cert,
      'webhooksOut.retryScheduleMs': [0, 100],
      'webhooksOut.timeoutMs': 1000,
    });
    receiver = await startReceiver(tls);
    const p = await setupPartner(server.ctx);
    partnerId = p.partnerId;
    api = apiFor(server, p.token);
    const c = (await connect(server.ctx, partnerId, { kind: 'sandbox' }, 'sms', '+15550009999')).channel;
    channel = { id: c.id, type: 'sms', gatewayId: c.gateway_id, sender: c.sender };
  });
  afterAll(async () => {
    await receiver.close();
    await server.stop();
    tls.cleanup();
  });

  it.each([
    ['http://example.com/hook', 400, 'invalid_request', /https/],
    ['ftp://example.com/hook', 400, 'invalid_request', /https/],
    ['not a url', 400, 'invalid_request', /valid absolute URL/],
    ['https://user:pw@example.com/hook', 400, 'invalid_request', /credentials/],
    ['https://127.0.0.1/hook', 400, 'url_not_allowed', /127\.0\.0\.1 is a loopback address/],
    ['https://10.0.0.1/hook', 400, 'url_not_allowed', /private/],
    ['https://169.254.169.254/latest/meta-data', 400, 'url_not_allowed', /cloud metadata/],
    ['https://[::1]:8443/hook', 400, 'url_not_allowed', /loopback/],
    ['https://[fd00::1]/hook', 400, 'url_not_allowed', /unique local/],
    ['https://[::ffff:0:7f00:1]/hook', 400, 'url_not_allowed', /loopback \(IPv4 inside IPv6\)/],
    ['https://[5f00::1]/hook', 400, 'url_not_allowed', /segment routing/],
    ['https://[3fff::1]/hook', 400, 'url_not_allowed', /reserved/],
    ['https://0.0.0.0/hook', 400, 'url_not_allowed', /unspecified/],
    ['https://100.64.1.1/hook', 400, 'url_not_allowed', /CGNAT/],
    ['https://localhost:8443/hook', 400, 'url_not_allowed', /localhost resolves to .*loopback/],
  ])('POST /v1/webhooks %s → %i %s', async (url, status, code, message) => {
    const r = await api('POST', '/v1/webhooks', { url });
    expect(r.status).toBe(status);
    expect(r.body.error.code).toBe(code);
    expect(r.body.error.message).toMatch(message);
    expect(r.body.error.details[0].field).toBe('url');
  });

  it('nothing was stored by the refusals', async () => {
    expect(await server.ctx.store.get(sql`SELECT COUNT(*) AS n FROM webhook_endpoints`)).toEqual({ n: 0 });
  });

  it.each([
    [
      'a hostname resolving to loopback',
      (port: number) => `https://localhost:${port}/hooks`,
      /localhost resolves to .* loopback/,
    ],
    ['an IP literal', (port: number) => `https://127.0.0.1:${port}/hooks`, /127\.0\.0\.1 is a loopback address/],
  ])('the connection-time guard refuses %s that got stored anyway (rebinding)', async (_what, urlOf, reason) => {
    // As if the name resolved to a public address at registration and to 127.0.0.1 now.
    const { endpoint } = await createEndpoint(server.ctx, partnerId, { url: urlOf(receiver.port) });
    try {
      const { eventId } = await inbound(server.ctx, partnerId, channel, '+14155550300', 'probe');
      const d = await waitFor(
        async () =>
          (await deliveryRows(server.ctx, endpoint.id)).find((x) => x.event_id === eventId && x.attempts >= 1),
        'an attempt',
        5000,
      );
      const a = (await attemptRows(server.ctx, d.id))[0];
      expect(a.status_code).toBeNull();
      expect(a.error).toMatch(/refused by the private-address guard/);
      expect(a.error).toMatch(reason);
      expect(receiver.received).toHaveLength(0);
    } finally {
      await server.ctx.store.run(sql`UPDATE webhook_endpoints SET deleted_at = 1 WHERE id = ${endpoint.id}`);
    }
  });
});

describe('TLS is verified', () => {
  it('without the CA file the self-signed receiver is refused; nothing is sent', async () => {
    const tls = makeCert();
    const server = await startTestServer({
      'webhooksOut.allowPrivateTargets': true,
      'webhooksOut.retryScheduleMs': [0],
    });
    const receiver = await startReceiver(tls);
    try {
      const p = await setupPartner(server.ctx);
      const c = (await connect(server.ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550008888')).channel;
      const api = apiFor(server, p.token);
      const ep = await api('POST', '/v1/webhooks', { url: receiver.url });
      expect(ep.status).toBe(201);
      const { eventId } = await inbound(
        server.ctx,
        p.partnerId,
        { id: c.id, type: 'sms', gatewayId: c.gateway_id, sender: c.sender },
        '+14155550301',
        'x',
      );
      const d = await waitFor(
        async () =>
          (await deliveryRows(server.ctx, ep.body.id)).find((x) => x.event_id === eventId && x.status === 'dead'),
        'dead',
        5000,
      );
      expect((await attemptRows(server.ctx, d.id))[0].error).toMatch(/self[- ]signed|certificate/i);
      expect(receiver.received).toHaveLength(0);
    } finally {
      await receiver.close();
      await server.stop();
      tls.cleanup();
    }
  });
});
