import { randomBytes } from 'node:crypto';
import {
  asciiJson,
  FakeHttpServer,
  randomToken,
  type Dialect,
  type Fault,
  type RecordedRequest,
  type Reply,
} from './common.js';

// One Graph API server for WhatsApp Cloud (phone number ids), Messenger (page ids) and
// Instagram (IG account ids), as Meta runs them: the object id in the path decides
// which product answers. Behaviour from shared/providers/FACTS.md A1 and B1.

export type GraphAccountKind = 'whatsapp' | 'page' | 'instagram' | 'waba';

/** A template as Meta's catalogue lists it (GET /{waba_id}/message_templates). */
export interface MetaTemplate {
  id: string;
  name: string;
  language: string;
  status: string;
  category: string;
  parameter_format?: 'POSITIONAL' | 'NAMED';
  components: unknown[];
}

export interface GraphAccount {
  id: string;
  kind: GraphAccountKind;
  token: string;
}

export interface GraphFakeOptions {
  accounts?: GraphAccount[];
  /** Approved WhatsApp templates; when unset every template name is accepted. */
  templates?: Array<{ name: string; language: string }>;
}

interface CodeInfo {
  status: number;
  message: string;
  details?: string;
  subcode?: number;
}

/** Known Graph error codes, so a test can ask for one by number. */
export const GRAPH_ERRORS: Record<number, CodeInfo> = {
  4: { status: 400, message: '(#4) Application request limit reached' },
  10: { status: 400, message: '(#10) This message is sent outside of allowed window.', subcode: 2018278 },
  100: { status: 400, message: '(#100) Invalid parameter' },
  190: { status: 401, message: 'Error validating access token: Session has expired.', subcode: 463 },
  551: { status: 400, message: "(#551) This person isn't available right now.", subcode: 1545041 },
  613: { status: 400, message: '(#613) Calls to this api have exceeded the rate limit.' },
  130429: {
    status: 400,
    message: '(#130429) Rate limit hit',
    details:
      'Message failed to send because there were too many messages sent from this phone number in a short period of time',
  },
  131000: {
    status: 500,
    message: '(#131000) Something went wrong',
    details: 'Message failed to send due to an unknown error.',
  },
  131008: { status: 400, message: '(#131008) Required parameter is missing' },
  131026: {
    status: 400,
    message: '(#131026) Message undeliverable',
    details: 'Message failed to send because the recipient is not a WhatsApp user.',
  },
  131056: {
    status: 400,
    message: '(#131056) (Business Account, Consumer Account) pair rate limit hit',
    details:
      'Message failed to send because there were too many messages sent from this phone number to the same phone number in a short period of time.',
  },
  132001: { status: 404, message: '(#132001) Template name does not exist in the translation' },
};

const PATH = /^\/(?:v\d+\.\d+\/)?([^/]+)\/messages$/;
const TEMPLATES_PATH = /^\/(?:v\d+\.\d+\/)?([^/]+)\/message_templates$/;
/** Graph's default page size for edges. */
const DEFAULT_LIMIT = 25;

function fbtrace(): string {
  return `A${randomToken(16).replace(/[-_]/g, 'x')}`;
}

export class GraphFake extends FakeHttpServer {
  readonly accounts = new Map<string, GraphAccount>();
  templates: Array<{ name: string; language: string }> | undefined;

  /** Each WABA's template catalogue, in Meta's order (newest first). */
  readonly catalogues = new Map<string, MetaTemplate[]>();

  constructor(opts: GraphFakeOptions = {}) {
    super((server: GraphFake) => makeDialect(() => server));
    for (const a of opts.accounts ?? []) this.addAccount(a);
    this.templates = opts.templates;
  }

  /** A WhatsApp Business Account whose catalogue GET /{waba_id}/message_templates lists. */
  setCatalogue(wabaId: string, token: string, templates: MetaTemplate[]): void {
    this.addAccount({ id: wabaId, kind: 'waba', token });
    this.catalogues.set(wabaId, templates);
  }

  addAccount(a: GraphAccount): void {
    this.accounts.set(a.id, a);
  }

  /** The account a request addresses (by path id, or by token for /me). */
  accountFor(req: RecordedRequest): GraphAccount | undefined {
    const id = PATH.exec(req.path)?.[1];
    if (id === 'me') {
      const token = tokenOf(req);
      return [...this.accounts.values()].find((a) => a.token === token && a.kind !== 'whatsapp');
    }
    return id === undefined ? undefined : this.accounts.get(id);
  }
}

export async function startGraphFake(opts: GraphFakeOptions = {}): Promise<GraphFake> {
  return new GraphFake(opts).start();
}

function tokenOf(req: RecordedRequest): string | undefined {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && /^Bearer\s+/i.test(auth)) return auth.replace(/^Bearer\s+/i, '').trim();
  return req.query.access_token;
}

function graphError(
  info: CodeInfo & { code: number; type?: string },
  whatsapp: boolean,
  headers?: Record<string, string>,
): Reply {
  const error: Record<string, unknown> = {
    message: info.message,
    type: info.type ?? 'OAuthException',
    code: info.code,
  };
  // WhatsApp errors carry error_data and (v16+) no subcode; Messenger errors carry the subcode.
  if (whatsapp) {
    if (info.details) error.error_data = { messaging_product: 'whatsapp', details: info.details };
  } else if (info.subcode !== undefined) {
    error.error_subcode = info.subcode;
  }
  error.fbtrace_id = fbtrace();
  return {
    status: info.status,
    headers: { 'content-type': 'application/json; charset=UTF-8', ...headers },
    body: asciiJson({ error }),
  };
}

function invalidParam(message: string, whatsapp: boolean, details?: string): Reply {
  return graphError({ status: 400, code: 100, message: `(#100) ${message}`, details }, whatsapp);
}

function makeDialect(self: () => GraphFake): Dialect {
  return {
    name: 'graph',
    recipientOf(req) {
      const b = req.body;
      if (typeof b?.to === 'string') return b.to;
      if (typeof b?.recipient?.id === 'string') return b.recipient.id;
      return undefined;
    },
    handle(req) {
      if (req.method === 'GET' && TEMPLATES_PATH.test(req.path)) return listTemplates(self(), req);
      if (req.method !== 'POST' || !PATH.test(req.path)) {
        return graphError({ status: 400, code: 2500, message: `Unknown path components: ${req.path}` }, false);
      }
      const token = tokenOf(req);
      const account = self().accountFor(req);
      if (!token) {
        return graphError(
          {
            status: 401,
            code: 190,
            message: 'An active access token must be used to query information about the current user.',
          },
          false,
        );
      }
      if (!account) {
        const id = PATH.exec(req.path)?.[1];
        return graphError(
          {
            status: 400,
            code: 100,
            subcode: 33,
            message: `Unsupported post request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
          },
          false,
        );
      }
      if (account.token !== token) {
        return graphError(
          { status: 401, code: 190, message: 'Invalid OAuth access token - Cannot parse access token' },
          account.kind === 'whatsapp',
        );
      }
      // Graph reads a JSON or form body by its Content-Type; any other body it does not see, and
      // the send then fails on its first missing parameter, as it does at Meta.
      const type = String(req.headers['content-type'] ?? '').toLowerCase();
      if (!type.startsWith('application/json') && !type.startsWith('application/x-www-form-urlencoded'))
        req = { ...req, body: undefined };
      return account.kind === 'whatsapp' ? sendWhatsapp(self(), req) : sendMessenger(req, account.kind);
    },
    rateLimit(req, fault) {
      const whatsapp = self().accountFor(req)?.kind === 'whatsapp';
      const code = whatsapp ? 130429 : 613;
      const headers = fault.retryAfterS !== undefined ? { 'retry-after': String(fault.retryAfterS) } : undefined;
      return graphError({ ...GRAPH_ERRORS[code], code }, whatsapp, headers);
    },
    serverError(req, status) {
      const whatsapp = self().accountFor(req)?.kind === 'whatsapp';
      const reply = graphError(
        { status, code: 2, message: 'An unexpected error has occurred. Please retry your request later.' },
        whatsapp,
      );
      return { ...reply, body: (reply.body as string).replace('"code":2', '"is_transient":true,"code":2') };
    },
    providerError(req, fault: Extract<Fault, { kind: 'error' }>) {
      const whatsapp = self().accountFor(req)?.kind === 'whatsapp';
      const code = Number(fault.code ?? 100);
      const known = GRAPH_ERRORS[code] ?? { status: 400, message: `(#${code}) Error` };
      return graphError(
        {
          code,
          status: fault.status ?? known.status,
          message: fault.message ?? known.message,
          details: fault.details ?? known.details,
          subcode: fault.subcode ?? known.subcode,
        },
        whatsapp,
      );
    },
  };
}

function wamid(digits: string): string {
  const inner = Buffer.concat([
    Buffer.from(`\x18\x0b${digits}\x15\x02\x00\x11\x18\x12`),
    Buffer.from(randomBytes(9).toString('hex').toUpperCase()),
    Buffer.from([0]),
  ]);
  return `wamid.HBgL${inner.toString('base64')}`;
}

function sendWhatsapp(fake: GraphFake, req: RecordedRequest): Reply {
  const b = req.body;
  if (!b || typeof b !== 'object') return invalidParam('The parameter messaging_product is required.', true);
  if (b.messaging_product === undefined) return invalidParam('The parameter messaging_product is required.', true);
  if (b.messaging_product !== 'whatsapp') {
    return invalidParam(`Param messaging_product must be one of {WHATSAPP} - got "${b.messaging_product}".`, true);
  }
  if (b.recipient_type !== undefined && b.recipient_type !== 'individual' && b.recipient_type !== 'group') {
    return invalidParam('Param recipient_type must be one of {INDIVIDUAL, GROUP}', true);
  }
  if (typeof b.to !== 'string' || b.to === '') return invalidParam('The parameter to is required.', true);
  const digits = b.to.replace(/^\+/, '');
  if (!/^[1-9]\d{6,14}$/.test(digits)) return invalidParam('Invalid parameter', true, `Invalid WhatsApp ID: ${b.to}`);

  const type = b.type ?? 'text';
  let templated = false;
  if (type === 'text') {
    const body = b.text?.body;
    if (typeof body !== 'string' || body === '') return invalidParam("The parameter text['body'] is required.", true);
    if (body.length > 4096) return invalidParam("Param text['body'] must be at most 4096 characters long.", true);
    if (b.text.preview_url !== undefined && typeof b.text.preview_url !== 'boolean') {
      return invalidParam("Param text['preview_url'] must be a boolean.", true);
    }
  } else if (type === 'template') {
    const t = b.template;
    if (typeof t?.name !== 'string' || t.name === '')
      return invalidParam("The parameter template['name'] is required.", true);
    if (typeof t.language?.code !== 'string')
      return invalidParam("The parameter template['language']['code'] is required.", true);
    if (t.components !== undefined && !Array.isArray(t.components))
      return invalidParam("Param template['components'] must be an array.", true);
    const known = fake.templates;
    if (known && !known.some((k) => k.name === t.name && k.language === t.language.code)) {
      return graphError(
        {
          ...GRAPH_ERRORS[132001],
          code: 132001,
          details: `template name (${t.name}) does not exist in ${t.language.code}`,
        },
        true,
      );
    }
    templated = true;
  } else {
    return invalidParam(`Param type must be one of {TEXT, TEMPLATE} - got "${type}".`, true);
  }
  const message: Record<string, string> = { id: wamid(digits) };
  if (templated) message.message_status = 'accepted';
  return {
    status: 200,
    headers: { 'content-type': 'application/json; charset=UTF-8' },
    body: asciiJson({ messaging_product: 'whatsapp', contacts: [{ input: b.to, wa_id: digits }], messages: [message] }),
  };
}

function sendMessenger(req: RecordedRequest, kind: GraphAccountKind): Reply {
  const b = req.body;
  const r = b?.recipient;
  if (!r || (typeof r.id !== 'string' && r.user_ref === undefined && r.phone_number === undefined)) {
    return invalidParam('The parameter recipient is required', false);
  }
  if (b.messaging_type !== undefined && !['RESPONSE', 'UPDATE', 'MESSAGE_TAG'].includes(b.messaging_type)) {
    return invalidParam('Param messaging_type must be one of {RESPONSE, UPDATE, MESSAGE_TAG}', false);
  }
  if (b.messaging_type === 'MESSAGE_TAG' && typeof b.tag !== 'string') {
    return invalidParam('Param tag is required when messaging_type is MESSAGE_TAG', false);
  }
  const m = b.message;
  if (!m || (typeof m.text !== 'string' && m.attachment === undefined)) {
    return invalidParam('Must send either message or sender action', false);
  }
  // Instagram: "Message text must be UTF-8 and be 1000 bytes or less"; Messenger: 2000
  // characters (counted here in UTF-16 units, as JavaScript counts).
  if (kind === 'instagram' && typeof m.text === 'string' && Buffer.byteLength(m.text, 'utf8') > 1000) {
    return invalidParam('Length of param message[text] must be less than or equal to 1000 bytes', false);
  }
  if (kind !== 'instagram' && typeof m.text === 'string' && m.text.length > 2000) {
    return invalidParam('Length of param message[text] must be less than or equal to 2000', false);
  }
  const reply: Record<string, string> = { message_id: `m_${randomToken(42)}` };
  if (typeof r.id === 'string') reply.recipient_id = r.id;
  return { status: 200, headers: { 'content-type': 'application/json; charset=UTF-8' }, body: asciiJson(reply) };
}

/** Graph's cursors are opaque base64; these carry the offset. */
const cursor = (i: number) => Buffer.from(`cursor:${i}`).toString('base64').replace(/=+$/, '');
const offsetOf = (c: string) => {
  const m = /^cursor:(\d+)$/.exec(Buffer.from(c, 'base64').toString('utf8'));
  return m ? Number(m[1]) : null;
};

// GET /{waba_id}/message_templates as Graph pages an edge: `limit` (default 25), `after` and
// `before` cursors, `fields` choosing the fields (id always), and `paging.next` on every page
// but the last, a full URL that repeats the access token and the query (as Meta's does).
function listTemplates(fake: GraphFake, req: RecordedRequest): Reply {
  const id = TEMPLATES_PATH.exec(req.path)![1];
  const token = tokenOf(req);
  if (!token)
    return graphError(
      { status: 400, code: 104, message: 'An access token is required to request this resource.' },
      true,
    );
  const account = fake.accounts.get(id);
  if (!account || account.kind !== 'waba') {
    return graphError(
      {
        status: 400,
        code: 100,
        subcode: 33,
        message: `Unsupported get request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
      },
      false,
    );
  }
  if (account.token !== token)
    return graphError(
      { status: 401, code: 190, message: 'Invalid OAuth access token - Cannot parse access token' },
      true,
    );
  const all = fake.catalogues.get(id) ?? [];
  const limit = req.query.limit !== undefined ? Number(req.query.limit) : DEFAULT_LIMIT;
  if (!Number.isInteger(limit) || limit < 1) return invalidParam('Param limit must be a positive integer', true);
  let start = 0;
  if (req.query.after !== undefined) {
    const o = offsetOf(req.query.after);
    if (o === null) return invalidParam('Invalid cursor', true);
    start = o + 1;
  }
  const rows = all.slice(start, start + limit);
  const fields = req.query.fields ? req.query.fields.split(',').map((f) => f.trim()) : ['name', 'status', 'id'];
  const data = rows.map((t) => Object.fromEntries(Object.entries(t).filter(([k]) => k === 'id' || fields.includes(k))));
  const body: Record<string, unknown> = { data };
  if (rows.length > 0) {
    const paging: Record<string, unknown> = {
      cursors: { before: cursor(start), after: cursor(start + rows.length - 1) },
    };
    if (start + rows.length < all.length) {
      const q = new URLSearchParams({
        ...req.query,
        access_token: token,
        limit: String(limit),
        after: cursor(start + rows.length - 1),
      });
      paging.next = `${fake.url}${req.path}?${q}`;
    }
    if (start > 0) {
      const q = new URLSearchParams({ ...req.query, access_token: token, limit: String(limit), before: cursor(start) });
      q.delete('after');
      paging.previous = `${fake.url}${req.path}?${q}`;
    }
    body.paging = paging;
  }
  return { status: 200, headers: { 'content-type': 'application/json; charset=UTF-8' }, body: asciiJson(body) };
}
