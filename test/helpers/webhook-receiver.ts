import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { Webhook } from 'standardwebhooks';
import type { TlsFiles } from './tls.js';

// A partner's webhook receiver, for real: HTTPS on 127.0.0.1 with a self-signed certificate
// (msgd trusts it through webhooksOut.caFile), verifying every request both ways: its own
// HMAC of the raw body (X-Msgd-Signature) and the standardwebhooks library. It keeps every
// request and dedupes by webhook-id, as the docs tell partners to.

export { makeCert, type TlsFiles } from './tls.js';

export interface Received {
  id: string;
  headers: Record<string, string>;
  raw: Buffer;
  body: any;
  at: number;
  /** Both checks passed with one of the receiver's secrets. */
  verified: boolean;
  hmacOk: boolean;
  standardOk: boolean;
}

/** What the receiver answers; a function decides per request (it sees the count so far). */
export type Behaviour =
  | { kind: 'ok'; status?: number }
  | { kind: 'status'; status: number; headers?: Record<string, string>; body?: string }
  | { kind: 'slow'; ms: number }
  | { kind: 'hang' };

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** webhook-ids acknowledged with a 2xx, in order, each once (the receiver's dedupe). */
  delivered: string[];
  /** How many times each webhook-id arrived (duplicates are possible, and identifiable). */
  seen: Map<string, number>;
  behave(b: Behaviour | ((r: Received, n: number) => Behaviour)): void;
  setSecrets(secrets: string[]): void;
  /** Stop listening (receiver down); `start` brings it back on the same port. */
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

function hmacOk(raw: Buffer, header: string | undefined, secret: string): boolean {
  if (!header?.startsWith('sha256=')) return false;
  const want = createHmac('sha256', secret).update(raw).digest();
  const got = Buffer.from(header.slice(7), 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}

export async function startReceiver(
  tls: TlsFiles,
  opts: { secrets?: string[]; path?: string } = {},
): Promise<Receiver> {
  let secrets = opts.secrets ?? [];
  let behaviour: Behaviour | ((r: Received, n: number) => Behaviour) = { kind: 'ok' };
  const received: Received[] = [];
  const delivered: string[] = [];
  const seen = new Map<string, number>();
  const sockets = new Set<Duplex>();
  const server = https.createServer(
    { key: readFileSync(tls.key), cert: readFileSync(tls.cert), keepAlive: true },
    (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const raw = Buffer.concat(chunks);
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
        const id = headers['webhook-id'] ?? '';
        const h = secrets.some(
          (s) => hmacOk(raw, headers['x-msgd-signature'], s) || hmacOk(raw, headers['x-msgd-signature-previous'], s),
        );
        let std = false;
        for (const s of secrets) {
          try {
            new Webhook(s).verify(raw.toString('utf8'), headers);
            std = true;
          } catch {
            // another secret may match (rotation)
          }
        }
        let body: any;
        try {
          body = JSON.parse(raw.toString('utf8'));
        } catch {
          body = undefined;
        }
        const r: Received = { id, headers, raw, body, at: Date.now(), verified: h && std, hmacOk: h, standardOk: std };
        received.push(r);
        seen.set(id, (seen.get(id) ?? 0) + 1);
        const b = typeof behaviour === 'function' ? behaviour(r, received.length) : behaviour;
        const ok = (status = 200) => {
          // A receiver acknowledges only what it could verify; it processes each id once.
          if (!r.verified) return res.writeHead(401).end('bad signature');
          if (!delivered.includes(id)) delivered.push(id);
          res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
        };
        switch (b.kind) {
          case 'ok':
            return ok(b.status);
          case 'status':
            return res.writeHead(b.status, b.headers ?? {}).end(b.body ?? `status ${b.status}`);
          case 'slow':
            return void setTimeout(() => ok(), b.ms);
          case 'hang':
            return;
        }
      });
    },
  );
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const port = await listen(0);
  const down = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      if (!server.listening) return resolve();
      server.close(() => resolve());
    });
  return {
    url: `https://127.0.0.1:${port}${opts.path ?? '/hooks'}`,
    port,
    received,
    delivered,
    seen,
    behave: (b) => (behaviour = b),
    setSecrets: (s) => (secrets = s),
    down,
    up: async () => {
      if (!server.listening) await listen(port);
    },
    close: down,
  };
}
