import http from 'node:http';
import type { AddressInfo } from 'node:net';

// The load balancer of the cluster tests: plain round robin over the instances marked up, as
// nginx's default upstream does, a request at a time, its body streamed through. Which instance
// answered is told in X-Cluster-Instance. An instance that refuses the connection (killed, not
// yet marked down) answers 502, as nginx does when its upstream has gone.

export interface Upstream {
  readonly port: number;
  up: boolean;
}

export interface RoundRobinProxy {
  readonly url: string;
  /** Requests forwarded to each upstream, by its index. */
  readonly forwarded: number[];
  /** What went wrong on the way to an upstream (each answered 502). */
  readonly errors: string[];
  close(): Promise<void>;
}

export async function startProxy(upstreams: readonly Upstream[]): Promise<RoundRobinProxy> {
  // Sockets to msgd are kept alive (msgd keeps them longer than a test runs: keepAliveTimeoutMs).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const forwarded = upstreams.map(() => 0);
  const errors: string[] = [];
  let next = 0;
  const pick = (): number | undefined => {
    for (let tried = 0; tried < upstreams.length; tried++) {
      const i = next++ % upstreams.length;
      if (upstreams[i].up) return i;
    }
    return undefined;
  };
  const server = http.createServer((req, res) => {
    const i = pick();
    const fail = (message: string) => {
      errors.push(message);
      if (res.headersSent) return res.destroy();
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'bad_gateway', message, details: [] } }));
    };
    if (i === undefined) {
      req.resume();
      return fail('no instance is up');
    }
    forwarded[i]++;
    const up = http.request(
      {
        host: '127.0.0.1',
        port: upstreams[i].port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, 'x-forwarded-for': req.socket.remoteAddress ?? '' },
        agent,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, { ...answer.headers, 'x-cluster-instance': String(i) });
        answer.pipe(res);
      },
    );
    up.on('error', (e) => fail(`instance ${i}: ${e.message}`));
    req.pipe(up);
  });
  server.keepAliveTimeout = 60_000;
  // A test opens a thousand connections at once: room for all of them in the accept queue.
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    forwarded,
    errors,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
