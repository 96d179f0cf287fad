import { randomBytes } from 'node:crypto';
import { FakeHttpServer, type Dialect, type RecordedRequest, type Reply } from './common.js';

// Twilio Programmable Messaging: POST /2010-04-01/Accounts/{sid}/Messages.json, as in
// shared/providers/FACTS.md D1 (twilio-oai create example, RestException body).

export interface TwilioFakeOptions {
  /** Account SID -> auth token. */
  accounts?: Record<string, string>;
}

export const TWILIO_ERRORS: Record<number, { status: number; message: string }> = {
  20003: { status: 401, message: 'Authenticate' },
  20404: { status: 404, message: 'The requested resource was not found' },
  20429: { status: 429, message: 'Too Many Requests' },
  20500: { status: 500, message: 'Internal Server Error' },
  21211: { status: 400, message: "The 'To' number is not a valid phone number." },
  21408: {
    status: 400,
    message: "Permission to send an SMS has not been enabled for the region indicated by the 'To' number.",
  },
  21602: { status: 400, message: 'Message body is required.' },
  21603: { status: 400, message: "A 'From' phone number is required." },
  21604: { status: 400, message: "A 'To' phone number is required." },
  21610: { status: 400, message: 'Attempt to send to unsubscribed recipient' },
  21614: { status: 400, message: "'To' number is not a valid mobile number" },
  21617: { status: 400, message: 'The concatenated message body exceeds the 1600 character limit.' },
};

const PATH = /^\/2010-04-01\/Accounts\/([^/]+)\/Messages\.json$/;
const E164 = /^\+[1-9]\d{1,14}$/;
// GSM 03.38 basic set plus the extension table (which costs two septets).
const GSM_BASIC =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';
const GSM_EXT = '^{}\\[~]|€\f';

export function twilioError(code: number, message?: string, status?: number, headers?: Record<string, string>): Reply {
  const known = TWILIO_ERRORS[code];
  const s = status ?? known?.status ?? 400;
  return {
    status: s,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
    body: {
      code,
      message: message ?? known?.message ?? 'Error',
      more_info: `https://www.twilio.com/docs/errors/${code}`,
      status: s,
    },
  };
}

/** Twilio's date format: RFC 2822 with a numeric zone. */
export function rfc2822(d: Date): string {
  return d.toUTCString().replace('GMT', '+0000');
}

export function segmentsOf(body: string): number {
  const chars = [...body];
  const gsm = chars.every((c) => GSM_BASIC.includes(c) || GSM_EXT.includes(c));
  if (gsm) {
    const septets = chars.reduce((n, c) => n + (GSM_EXT.includes(c) ? 2 : 1), 0);
    return septets <= 160 ? 1 : Math.ceil(septets / 153);
  }
  const units = body.length; // UTF-16 code units, as the network counts UCS-2
  return units <= 70 ? 1 : Math.ceil(units / 67);
}

function str(v: unknown): string | undefined {
  if (Array.isArray(v)) return typeof v[0] === 'string' ? v[0] : undefined;
  return typeof v === 'string' ? v : undefined;
}

export class TwilioFake extends FakeHttpServer {
  readonly accounts: Map<string, string>;
  /** API keys: key SID → the account it belongs to and its secret (FACTS D1: "API Key SID:Secret also works"). */
  readonly apiKeys = new Map<string, { account: string; secret: string }>();

  constructor(opts: TwilioFakeOptions = {}) {
    super((server: TwilioFake) => makeDialect(server));
    this.accounts = new Map(Object.entries(opts.accounts ?? {}));
  }

  addAccount(sid: string, token: string): void {
    this.accounts.set(sid, token);
  }
}

export async function startTwilioFake(opts: TwilioFakeOptions = {}): Promise<TwilioFake> {
  return new TwilioFake(opts).start();
}

function basicAuth(req: RecordedRequest): { user: string; pass: string } | undefined {
  const h = req.headers.authorization;
  if (typeof h !== 'string' || !/^Basic\s+/i.test(h)) return undefined;
  const decoded = Buffer.from(h.replace(/^Basic\s+/i, ''), 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  return i < 0 ? undefined : { user: decoded.slice(0, i), pass: decoded.slice(i + 1) };
}

function makeDialect(fake: TwilioFake): Dialect {
  return {
    name: 'twilio',
    recipientOf(req) {
      return str(req.body?.To);
    },
    handle(req) {
      const m = PATH.exec(req.path);
      const auth = basicAuth(req);
      // Twilio authenticates before routing: no valid credentials, no 404 either.
      const key = auth && fake.apiKeys.get(auth.user);
      const account = key
        ? key.secret === auth!.pass
          ? key.account
          : undefined
        : auth && fake.accounts.get(auth.user) === auth.pass
          ? auth.user
          : undefined;
      if (!account) return twilioError(20003);
      if (!m || req.method !== 'POST') {
        return twilioError(20404, `The requested resource ${req.path} was not found`);
      }
      if (m[1] !== account) return twilioError(20003);
      return createMessage(m[1], req);
    },
    rateLimit(_req, fault) {
      const headers = fault.retryAfterS !== undefined ? { 'retry-after': String(fault.retryAfterS) } : undefined;
      return twilioError(20429, undefined, 429, headers);
    },
    serverError(_req, status) {
      return twilioError(20500, undefined, status);
    },
    providerError(_req, fault) {
      return twilioError(Number(fault.code ?? 21211), fault.message, fault.status);
    },
  };
}

function createMessage(accountSid: string, req: RecordedRequest): Reply {
  // Twilio reads only form parameters: a JSON body looks like no parameters at all.
  const isForm = String(req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded');
  const p = isForm ? (req.body ?? {}) : {};
  const to = str(p.To);
  const from = str(p.From);
  const service = str(p.MessagingServiceSid);
  const body = str(p.Body);
  const media = p.MediaUrl;
  if (!to) return twilioError(21604);
  if (!from && !service) return twilioError(21603);
  if (!body && media === undefined && !str(p.ContentSid)) return twilioError(21602);
  if (body && body.length > 1600) return twilioError(21617);
  if (!E164.test(to)) return twilioError(21211, `The 'To' number ${to} is not a valid phone number.`);
  if (from && !E164.test(from) && !/^[A-Za-z0-9 ]{1,11}$/.test(from) && !/^\d{5,6}$/.test(from)) {
    return twilioError(
      21212,
      `The 'From' number ${from} is not a valid phone number, shortcode, or alphanumeric sender ID.`,
    );
  }
  const sid = `SM${randomBytes(16).toString('hex')}`;
  const now = rfc2822(new Date());
  const uri = `/2010-04-01/Accounts/${accountSid}/Messages/${sid}`;
  return {
    status: 201,
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: {
      account_sid: accountSid,
      api_version: '2010-04-01',
      body: body ?? '',
      date_created: now,
      date_sent: null,
      date_updated: now,
      direction: 'outbound-api',
      error_code: null,
      error_message: null,
      from: from ?? null,
      messaging_service_sid: service ?? null,
      num_media: String(Array.isArray(media) ? media.length : media === undefined ? 0 : 1),
      // With a Messaging Service the sender is picked later, so segments are not counted yet.
      num_segments: service ? '0' : String(segmentsOf(body ?? '')),
      price: null,
      price_unit: 'USD',
      sid,
      status: service ? 'accepted' : 'queued',
      subresource_uris: { media: `${uri}/Media.json` },
      to,
      uri: `${uri}.json`,
    },
  };
}
