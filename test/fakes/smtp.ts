import { readFileSync } from 'node:fs';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { makeCert, type TlsFiles } from '../helpers/tls.js';
import { normalizeRecipient } from './common.js';

// A real SMTP server (smtp-server) that records what it receives, with optional AUTH,
// STARTTLS or implicit TLS on a self-signed certificate, and injectable SMTP replies.

export interface ReceivedMail {
  envelopeFrom: string;
  envelopeTo: string[];
  raw: string;
  /** Top-level headers, lower-cased names, unfolded; the last value wins. */
  headers: Record<string, string>;
  subject?: string;
  messageId?: string;
  secure: boolean;
  user?: string;
  at: number;
}

export type SmtpFault =
  /** Answer this SMTP reply (e.g. 550, 451) at the given stage (default rcpt). */
  | { kind: 'reply'; code: number; message?: string; stage?: 'mail' | 'rcpt' | 'data' }
  /** Delay the final DATA answer. */
  | { kind: 'latency'; ms: number }
  /** Take the DATA and never answer it. */
  | { kind: 'timeout' };

export type SmtpFaultSpec = SmtpFault & { count?: number };

export interface SmtpFakeOptions {
  auth?: { user: string; pass: string };
  /** 'starttls': plain port offering STARTTLS; 'implicit': TLS from the first byte (465 style). */
  tls?: false | 'starttls' | 'implicit';
}

export interface SelfSignedCert {
  key: string;
  cert: string;
}

/** A throwaway localhost certificate; null when openssl is not installed. */
export function selfSignedCert(): SelfSignedCert | null {
  let tls: TlsFiles;
  try {
    tls = makeCert();
  } catch {
    return null;
  }
  try {
    return { key: readFileSync(tls.key, 'utf8'), cert: readFileSync(tls.cert, 'utf8') };
  } finally {
    tls.cleanup();
  }
}

function smtpError(code: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

export function parseHeaders(raw: string): Record<string, string> {
  const end = raw.search(/\r?\n\r?\n/);
  const head = (end < 0 ? raw : raw.slice(0, end)).replace(/\r?\n[ \t]+/g, ' ');
  const out: Record<string, string> = {};
  for (const line of head.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0) out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  return out;
}

interface Armed {
  fault: SmtpFault;
  left: number;
}

export class SmtpFake {
  readonly messages: ReceivedMail[] = [];
  readonly host = '127.0.0.1';
  port = 0;
  readonly cert: SelfSignedCert | null;
  private server: SMTPServer | null = null;
  private next: Armed[] = [];
  private byRcpt = new Map<string, Armed>();

  constructor(private readonly opts: SmtpFakeOptions = {}) {
    this.cert = opts.tls ? selfSignedCert() : null;
    if (opts.tls && !this.cert) throw new Error('openssl is needed for a TLS SMTP fake');
  }

  async start(): Promise<this> {
    await this.up();
    return this;
  }

  failNext(spec: SmtpFaultSpec): void {
    this.next.push({ fault: spec, left: spec.count ?? 1 });
  }

  failFor(rcpt: string, spec: SmtpFaultSpec): void {
    this.byRcpt.set(normalizeRecipient(rcpt), { fault: spec, left: spec.count ?? Infinity });
  }

  clearFaults(): void {
    this.next = [];
    this.byRcpt.clear();
  }

  reset(): void {
    this.messages.length = 0;
    this.clearFaults();
  }

  /** Outage: close the listener and every session; the port refuses connections. */
  async down(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const c of server.connections) c.close();
    });
  }

  async up(): Promise<void> {
    if (this.server) return;
    const server = new SMTPServer(this.serverOptions());
    server.on('error', () => {}); // client resets are expected in fault tests
    await new Promise<void>((resolve, reject) => {
      server.server.once('error', reject);
      server.listen(this.port, this.host, () => {
        server.server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.server.address() as { port: number }).port;
    this.server = server;
  }

  async close(): Promise<void> {
    await this.down();
  }

  private take(rcpt: string | undefined, stage: 'mail' | 'rcpt' | 'data'): SmtpFault | undefined {
    const stageOf = (f: SmtpFault) => (f.kind === 'reply' ? (f.stage ?? 'rcpt') : 'data');
    const byTo = rcpt === undefined ? undefined : this.byRcpt.get(normalizeRecipient(rcpt));
    const armed =
      byTo && stageOf(byTo.fault) === stage
        ? byTo
        : this.next[0] && stageOf(this.next[0].fault) === stage
          ? this.next[0]
          : undefined;
    if (!armed) return undefined;
    armed.left -= 1;
    if (armed.left <= 0) {
      if (armed === byTo) this.byRcpt.delete(normalizeRecipient(rcpt!));
      else this.next.shift();
    }
    return armed.fault;
  }

  private serverOptions(): SMTPServerOptions {
    const { auth, tls } = this.opts;
    const options: SMTPServerOptions = {
      logger: false,
      secure: tls === 'implicit',
      authOptional: !auth,
      allowInsecureAuth: true,
      // Without TLS configured, STARTTLS must not be offered: clients would upgrade to the
      // library's built-in certificate and fail verification.
      disabledCommands: tls ? [] : ['STARTTLS'],
      closeTimeout: 100,
      onAuth: (a, _session, cb) => {
        if (auth && a.username === auth.user && a.password === auth.pass) return cb(null, { user: a.username });
        cb(smtpError(535, 'Authentication credentials invalid'));
      },
      onMailFrom: (_address, _session, cb) => this.reply(this.take(undefined, 'mail'), cb),
      onRcptTo: (address, _session, cb) => this.reply(this.take(address.address, 'rcpt'), cb),
      onData: (stream, session, cb) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => this.finishData(Buffer.concat(chunks).toString('utf8'), session, cb));
      },
    };
    if (this.cert) Object.assign(options, { key: this.cert.key, cert: this.cert.cert });
    return options;
  }

  private reply(fault: SmtpFault | undefined, cb: (err?: Error | null) => void): void {
    if (fault?.kind === 'reply') return cb(smtpError(fault.code, fault.message ?? defaultText(fault.code)));
    cb();
  }

  private finishData(
    raw: string,
    session: SMTPServerSession,
    cb: (err?: Error | null, message?: string) => void,
  ): void {
    const rcpts = session.envelope.rcptTo.map((r) => r.address);
    const fault = this.take(rcpts[0], 'data');
    if (fault?.kind === 'timeout') return;
    const done = () => {
      if (fault?.kind === 'reply') return cb(smtpError(fault.code, fault.message ?? defaultText(fault.code)));
      const headers = parseHeaders(raw);
      const from = session.envelope.mailFrom;
      this.messages.push({
        envelopeFrom: from ? from.address : '',
        envelopeTo: rcpts,
        raw,
        headers,
        subject: headers.subject,
        messageId: headers['message-id'],
        secure: session.secure,
        user: typeof session.user === 'string' ? session.user : undefined,
        at: Date.now(),
      });
      cb(null, `OK queued as ${this.messages.length}`);
    };
    if (fault?.kind === 'latency') setTimeout(done, fault.ms);
    else done();
  }
}

function defaultText(code: number): string {
  if (code === 550) return 'Requested action not taken: mailbox unavailable';
  if (code === 552) return 'Message size exceeds fixed maximum message size';
  if (code === 554) return 'Transaction failed';
  if (code === 421) return 'Service not available, closing transmission channel';
  if (code >= 400 && code < 500) return 'Requested action aborted: try again later';
  return 'Rejected';
}

export async function startSmtpFake(opts: SmtpFakeOptions = {}): Promise<SmtpFake> {
  return new SmtpFake(opts).start();
}
