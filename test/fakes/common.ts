import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';

// Shared machinery for the fake provider servers: listening, recording, fault injection
// and outages. Each provider module supplies a Dialect that answers like the real API.

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  headers: http.IncomingHttpHeaders;
  raw: Buffer;
  rawText: string;
  /** JSON or form body (form: repeated keys become arrays); undefined when unparseable or empty. */
  body: any;
  at: number;
  /** What the fake answered; undefined for timeouts and resets. */
  reply?: { status: number; headers: Record<string, string>; body: string };
}

export type Fault =
  /** Delay, then answer normally. */
  | { kind: 'latency'; ms: number }
  /** A bare HTTP status with the provider's usual body for it (or the given one). */
  | { kind: 'status'; status: number; body?: string | object; headers?: Record<string, string> }
  /** The provider's rate-limit answer; retryAfterS becomes the provider's hint. */
  | { kind: 'rate_limit'; retryAfterS?: number }
  /** Accept the request and never answer. */
  | { kind: 'timeout' }
  /** Answer 200 with the headers and the first bytes of a body, then never finish it. */
  | { kind: 'stall' }
  /** Tear the TCP connection down (RST) without answering. */
  | { kind: 'reset' }
  /** A permanent provider error: code from the provider's table, status/message defaulted from it. */
  | {
      kind: 'error';
      code?: number | string;
      status?: number;
      message?: string;
      subcode?: number;
      details?: string;
      field?: string;
    };

export type FaultSpec = Fault & { count?: number };

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  /** Objects are sent as JSON. */
  body?: string | object;
}

export interface Dialect {
  name: string;
  recipientOf(req: RecordedRequest): string | undefined;
  handle(req: RecordedRequest): Reply;
  rateLimit(req: RecordedRequest, fault: Extract<Fault, { kind: 'rate_limit' }>): Reply;
  serverError(req: RecordedRequest, status: number): Reply;
  providerError(req: RecordedRequest, fault: Extract<Fault, { kind: 'error' }>): Reply;
}

interface ArmedFault {
  fault: Fault;
  left: number;
}

export function normalizeRecipient(r: string): string {
  return r
    .trim()
    .toLowerCase()
    .replace(/^(whatsapp:)?\+/, '');
}

export function listen(server: http.Server | import('node:net').Server, port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** Meta sends non-ASCII as \uXXXX with lowercase hex; clients must cope with it. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

export function randomToken(bytes: number): string {
  return randomBytes(bytes).toString('base64url');
}

function parseBody(headers: http.IncomingHttpHeaders, raw: Buffer): any {
  if (raw.length === 0) return undefined;
  const type = String(headers['content-type'] ?? '').toLowerCase();
  const text = raw.toString('utf8');
  if (type.includes('application/x-www-form-urlencoded')) {
    const out: Record<string, string | string[]> = {};
    for (const [k, v] of new URLSearchParams(text)) {
      const prev = out[k];
      out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
    }
    return out;
  }
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class FakeHttpServer {
  readonly requests: RecordedRequest[] = [];
  /** Added to every answer, for load and timing tests. */
  latencyMs = 0;
  /** The provider's clock, which stamps each request; a test can give it msgd's TestClock. */
  now: () => number = Date.now;
  private readonly server: http.Server;
  private port = 0;
  private listening = false;
  private nextFaults: ArmedFault[] = [];
  private recipientFaults = new Map<string, ArmedFault>();

  private readonly dialect: Dialect;

  /** The dialect is built from the finished server so it can read subclass state. */
  constructor(makeDialect: (server: any) => Dialect) {
    this.dialect = makeDialect(this);
    this.server = http.createServer((req, res) => this.onRequest(req, res));
  }

  async start(): Promise<this> {
    this.port = await listen(this.server, 0);
    this.listening = true;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  last(): RecordedRequest | undefined {
    return this.requests[this.requests.length - 1];
  }

  /** Applies to the next `count` requests (default 1), in order of arming. */
  failNext(spec: FaultSpec): void {
    this.nextFaults.push({ fault: spec, left: spec.count ?? 1 });
  }

  /** Applies to requests for this recipient until cleared, or `count` times. */
  failFor(recipient: string, spec: FaultSpec): void {
    this.recipientFaults.set(normalizeRecipient(recipient), { fault: spec, left: spec.count ?? Infinity });
  }

  clearFaults(): void {
    this.nextFaults = [];
    this.recipientFaults.clear();
  }

  reset(): void {
    this.requests.length = 0;
    this.latencyMs = 0;
    this.clearFaults();
  }

  /** Outage: stop listening and drop every connection, so clients see refused connections. */
  async down(): Promise<void> {
    if (!this.listening) return;
    this.listening = false;
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** Back on the same port, so a configured base URL keeps working. */
  async up(): Promise<void> {
    if (this.listening) return;
    await listen(this.server, this.port);
    this.listening = true;
  }

  async close(): Promise<void> {
    await this.down();
  }

  private takeFault(rec: RecordedRequest): Fault | undefined {
    const to = this.dialect.recipientOf(rec);
    const byTo = to === undefined ? undefined : this.recipientFaults.get(normalizeRecipient(to));
    const armed = byTo ?? this.nextFaults[0];
    if (!armed) return undefined;
    armed.left -= 1;
    if (armed.left <= 0) {
      if (armed === byTo) this.recipientFaults.delete(normalizeRecipient(to!));
      else this.nextFaults.shift();
    }
    return armed.fault;
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void this.answer(req, res, Buffer.concat(chunks));
    });
  }

  private async answer(req: http.IncomingMessage, res: http.ServerResponse, raw: Buffer): Promise<void> {
    const u = new URL(req.url ?? '/', 'http://fake');
    const rec: RecordedRequest = {
      method: req.method ?? 'GET',
      path: u.pathname,
      query: Object.fromEntries(u.searchParams),
      headers: req.headers,
      raw,
      rawText: raw.toString('utf8'),
      body: parseBody(req.headers, raw),
      at: this.now(),
    };
    this.requests.push(rec);
    const fault = this.takeFault(rec);
    const delay = this.latencyMs + (fault?.kind === 'latency' ? fault.ms : 0);
    if (delay > 0) await sleep(delay);

    if (fault?.kind === 'timeout') return; // the socket stays open until the client gives up
    if (fault?.kind === 'stall') {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': '1000' });
      res.write('{"sid": "SM'); // and nothing more until the client gives up
      return;
    }
    if (fault?.kind === 'reset') {
      req.socket.resetAndDestroy();
      return;
    }
    let reply: Reply;
    try {
      if (fault?.kind === 'rate_limit') reply = this.dialect.rateLimit(rec, fault);
      else if (fault?.kind === 'error') reply = this.dialect.providerError(rec, fault);
      else if (fault?.kind === 'status') {
        const base = this.dialect.serverError(rec, fault.status);
        reply = {
          status: fault.status,
          headers: { ...base.headers, ...fault.headers },
          body: fault.body ?? base.body,
        };
      } else reply = this.dialect.handle(rec);
    } catch (err) {
      reply = { status: 500, body: { fake_error: String(err) } };
    }
    this.send(res, rec, reply);
  }

  private send(res: http.ServerResponse, rec: RecordedRequest, reply: Reply): void {
    const headers: Record<string, string> = { ...reply.headers };
    let body = '';
    if (typeof reply.body === 'string') body = reply.body;
    else if (reply.body !== undefined) {
      body = JSON.stringify(reply.body);
      headers['content-type'] ??= 'application/json; charset=utf-8';
    }
    rec.reply = { status: reply.status, headers, body };
    if (res.destroyed) return;
    res.writeHead(reply.status, headers);
    res.end(body);
  }
}
