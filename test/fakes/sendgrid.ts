import { FakeHttpServer, randomToken, type Dialect, type RecordedRequest, type Reply } from './common.js';

// SendGrid v3 Mail Send: POST /v3/mail/send, as in shared/providers/FACTS.md C1.

export interface SendgridFakeOptions {
  apiKeys?: string[];
  /** Keys that exist but lack the mail.send scope (403). */
  restrictedKeys?: string[];
}

interface SgError {
  message: string;
  field: string | null;
  help?: string | null;
}

const HELP = 'http://sendgrid.com/docs/API_Reference/Web_API_v3/Mail/errors.html';
const EMAIL = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;
const MAX_BYTES = 30 * 1024 * 1024;

export function sendgridErrors(status: number, errors: SgError[], headers?: Record<string, string>): Reply {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: { errors } };
}

export interface SentMail {
  messageId: string;
  request: RecordedRequest;
}

export class SendgridFake extends FakeHttpServer {
  readonly apiKeys: Set<string>;
  readonly restrictedKeys: Set<string>;
  /** Accepted (202) sends, with the X-Message-Id each got. */
  readonly sent: SentMail[] = [];

  constructor(opts: SendgridFakeOptions = {}) {
    super((server: SendgridFake) => makeDialect(server));
    this.apiKeys = new Set(opts.apiKeys ?? []);
    this.restrictedKeys = new Set(opts.restrictedKeys ?? []);
  }

  override reset(): void {
    super.reset();
    this.sent.length = 0;
  }
}

export async function startSendgridFake(opts: SendgridFakeOptions = {}): Promise<SendgridFake> {
  return new SendgridFake(opts).start();
}

function makeDialect(fake: SendgridFake): Dialect {
  return {
    name: 'sendgrid',
    recipientOf(req) {
      const email = req.body?.personalizations?.[0]?.to?.[0]?.email;
      return typeof email === 'string' ? email : undefined;
    },
    handle(req) {
      const auth = req.headers.authorization;
      if (typeof auth !== 'string' || !/^Bearer\s+\S/i.test(auth)) {
        return sendgridErrors(401, [{ field: null, message: 'authorization required' }]);
      }
      const key = auth.replace(/^Bearer\s+/i, '').trim();
      if (fake.restrictedKeys.has(key)) return sendgridErrors(403, [{ field: null, message: 'access forbidden' }]);
      if (!fake.apiKeys.has(key)) {
        return sendgridErrors(401, [
          { field: null, message: 'The provided authorization grant is invalid, expired, or revoked' },
        ]);
      }
      if (req.path !== '/v3/mail/send') return sendgridErrors(404, [{ field: null, message: 'resource not found' }]);
      if (req.method !== 'POST') return sendgridErrors(405, [{ field: null, message: 'method not allowed' }]);
      if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
        return sendgridErrors(415, [{ field: null, message: 'Content-Type should be application/json.' }]);
      }
      if (req.raw.length > MAX_BYTES) return sendgridErrors(413, [{ field: null, message: 'Payload Too Large' }]);
      if (req.body === undefined || typeof req.body !== 'object') {
        return sendgridErrors(400, [{ field: null, message: 'Bad Request', help: null }]);
      }
      const errors = validate(req.body);
      if (errors.length > 0) return sendgridErrors(400, errors);
      if (req.body.mail_settings?.sandbox_mode?.enable === true) return { status: 200 };
      const messageId = randomToken(16);
      fake.sent.push({ messageId, request: req });
      return { status: 202, headers: { 'x-message-id': messageId } };
    },
    rateLimit(_req, fault) {
      const reset = Math.ceil(Date.now() / 1000) + (fault.retryAfterS ?? 1);
      return sendgridErrors(429, [{ field: null, message: 'too many requests' }], {
        'x-ratelimit-limit': '600',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': String(reset),
      });
    },
    serverError(_req, status) {
      return sendgridErrors(status, [
        { field: null, message: status === 503 ? 'service unavailable' : 'internal server error' },
      ]);
    },
    providerError(_req, fault) {
      return sendgridErrors(fault.status ?? 400, [
        {
          field: fault.field ?? null,
          message: fault.message ?? 'Bad Request',
          help: fault.field ? `${HELP}#message.${fault.field}` : null,
        },
      ]);
    },
  };
}

function err(field: string, message: string): SgError {
  return { field, message, help: `${HELP}#message.${field.replace(/\.\d+/g, '')}` };
}

function validate(b: any): SgError[] {
  const out: SgError[] = [];
  const hasTemplate = typeof b.template_id === 'string';
  const ps = b.personalizations;
  if (!Array.isArray(ps) || ps.length === 0) {
    out.push(
      err('personalizations', 'The personalizations field is required and must have at least one personalization.'),
    );
  } else {
    if (ps.length > 1000)
      out.push(err('personalizations', 'The personalizations field may not contain more than 1000 items.'));
    ps.forEach((p: any, i: number) => {
      if (!Array.isArray(p?.to) || p.to.length === 0) {
        out.push(
          err(
            `personalizations.${i}.to`,
            'The to array is required for all personalization objects, and must have at least one email object with a valid email address.',
          ),
        );
      } else {
        p.to.forEach((t: any, j: number) => {
          if (typeof t?.email !== 'string' || !EMAIL.test(t.email))
            out.push(err(`personalizations.${i}.to.${j}.email`, 'Does not contain a valid address.'));
        });
      }
      if (p?.custom_args !== undefined) {
        const values = typeof p.custom_args === 'object' && p.custom_args ? Object.values(p.custom_args) : [null];
        if (values.some((v) => typeof v !== 'string')) {
          out.push(err(`personalizations.${i}.custom_args`, 'Invalid type. Expected: string, given: non-string.'));
        }
      }
    });
  }
  if (typeof b.from?.email !== 'string') {
    out.push(
      err(
        'from.email',
        'The from object must be provided for every email send. It is an object that requires the email parameter, but may also contain a name parameter.',
      ),
    );
  } else if (!EMAIL.test(b.from.email)) {
    out.push(err('from.email', 'The from email does not contain a valid address.'));
  }
  if (b.reply_to !== undefined && (typeof b.reply_to?.email !== 'string' || !EMAIL.test(b.reply_to.email))) {
    out.push(err('reply_to.email', 'The reply_to email does not contain a valid address.'));
  }
  const everySubject = Array.isArray(ps) && ps.length > 0 && ps.every((p: any) => typeof p?.subject === 'string');
  if ((typeof b.subject !== 'string' || b.subject === '') && !hasTemplate && !everySubject) {
    out.push(
      err(
        'subject',
        'The subject is required. You can get around this requirement if you use a template with a subject defined or if every personalization has a subject defined.',
      ),
    );
  }
  const content = b.content;
  if (!hasTemplate && (!Array.isArray(content) || content.length === 0)) {
    out.push(
      err(
        'content',
        'Unless a valid template_id is provided, the content parameter is required. There must be at least one defined content block. We typically suggest both text/plain and text/html blocks are included, but only one block is required.',
      ),
    );
  } else if (Array.isArray(content)) {
    content.forEach((c: any, i: number) => {
      if (typeof c?.value !== 'string' || c.value === '')
        out.push(err(`content.${i}.value`, 'The content value must be a string at least one character in length.'));
      if (typeof c?.type !== 'string' || c.type === '')
        out.push(
          err(
            `content.${i}.type`,
            'The content type cannot contain ";", or CRLF characters, and must be at least 1 character.',
          ),
        );
    });
    const types = content.map((c: any) => c?.type);
    const plain = types.indexOf('text/plain');
    const html = types.indexOf('text/html');
    if (plain > 0 || (html >= 0 && plain > html)) {
      out.push(err('content', 'The text/plain content type must be first, followed by any other content types.'));
    }
  }
  return out;
}
