import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { STORAGE_UNAVAILABLE } from '../db/pg/errors.js';
import { isStorageError } from '../db/storage.js';

/** Whether an error is the storage refusing or unreachable (a 503 with Retry-After, not a 500). */
export { isStorageError };
import { AppError, issueDetails, type ErrorDetail } from '../lib/errors.js';

// Domain codes carry no HTTP status; this table is the only place they get one.
const STATUS: Record<string, number> = {
  unauthorized: 401,
  invalid_signature: 401,
  forbidden: 403,
  partner_suspended: 403,
  insufficient_scope: 403,
  channel_not_assigned: 403,
  insufficient_balance: 402,
  invalid_request: 400,
  url_not_allowed: 400,
  invalid_json: 400,
  unknown_payload: 400,
  outside_customer_service_window: 400,
  template_invalid: 400,
  recipient_suppressed: 400,
  consent_required: 400,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  message_not_cancelable: 409,
  idempotency_key_reused: 422,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  storage_unavailable: 503,
  not_ready: 503,
  not_on_postgresql: 501,
  link_expired: 410,
  csrf_token_mismatch: 419,
};

export function statusFor(code: string): number {
  return STATUS[code] ?? 500;
}

export function errorBody(code: string, message: string, details: ErrorDetail[] = []) {
  return { error: { code, message, details } };
}

export function sendError(
  reply: FastifyReply,
  code: string,
  message: string,
  details: ErrorDetail[] = [],
  status?: number,
) {
  return reply
    .code(status ?? statusFor(code))
    .type('application/json; charset=utf-8')
    .send(errorBody(code, message, details));
}

/** Fastify's validation items: the /v1 validator compiler's (zod paths) or JSON-schema ones. */
function validationDetails(items: unknown): ErrorDetail[] {
  if (!Array.isArray(items)) return [];
  return issueDetails(
    items.map((i: any) => {
      let path: PropertyKey[] = Array.isArray(i.path)
        ? i.path
        : String(i.instancePath ?? '')
            .split('/')
            .filter(Boolean);
      if (path.length === 0 && i.params?.missingProperty) path = [i.params.missingProperty];
      return { path, message: i.message ?? 'invalid' };
    }),
  );
}

/** The one error handler: domain errors to their status, framework errors to ours, 5xx hidden. */
export function errorHandler(err: FastifyError | AppError | Error, req: FastifyRequest, reply: FastifyReply) {
  if (err instanceof AppError) {
    const status = statusFor(err.code);
    if (status === 401 && err.code === 'unauthorized')
      reply.header('www-authenticate', String(err.data?.wwwAuthenticate ?? 'Bearer'));
    if (status >= 500) req.log.error({ err }, 'domain error mapped to 5xx');
    return sendError(reply, err.code, err.message, err.details, status);
  }
  const fe = err as FastifyError & { validation?: unknown };
  if (fe.validation) {
    return sendError(reply, 'invalid_request', 'the request is invalid', validationDetails(fe.validation));
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return sendError(reply, 'payload_too_large', 'the request body is larger than allowed');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return sendError(reply, 'unsupported_media_type', 'send the body as application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return sendError(reply, 'invalid_json', 'the body is empty; send a JSON object');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return sendError(reply, 'invalid_request', 'the Content-Length does not match the body');
  }
  if (fe.statusCode === 400 && (fe instanceof SyntaxError || /JSON/i.test(fe.message))) {
    return sendError(reply, 'invalid_json', 'the body is not valid JSON');
  }
  if (fe.statusCode === 429) {
    return sendError(reply, 'rate_limited', fe.message || 'too many requests');
  }
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    return sendError(reply, 'invalid_request', fe.message, [], fe.statusCode);
  }
  if (isStorageError(err)) {
    logStorageError(req, err);
    reply.header('retry-after', String(STORAGE_RETRY_AFTER_S));
    return sendError(reply, 'storage_unavailable', storageMessage(err));
  }
  req.log.error({ err }, 'unhandled error');
  return sendError(reply, 'internal_error', 'something went wrong on our side; the request id identifies it', [], 500);
}

const STORAGE_RETRY_AFTER_S = 30;

/** What a storage fault means for the request: the same code and Retry-After from either store. */
function storageMessage(err: unknown): string {
  const e = err as { code?: unknown; outcomeUnknown?: unknown };
  if (e.code !== STORAGE_UNAVAILABLE) {
    // SQLite: the batch it was part of was rolled back whole.
    return 'msgd cannot write to its storage right now (the disk may be full); nothing of this request was kept: try again later';
  }
  if (e.outcomeUnknown === true) {
    // PostgreSQL: the connection was lost after the COMMIT was sent.
    return 'msgd lost its database while finishing this request, which may have been kept: repeat it later with the same Idempotency-Key to get its answer';
  }
  // PostgreSQL rolled back what the request had begun.
  return 'msgd cannot reach its database right now; nothing of this request was kept: try again later';
}
let storageLog = { at: 0, refused: 0 };

/** One line per 10 s while the storage fails, with the count refused since: not one per request. */
function logStorageError(req: FastifyRequest, err: unknown) {
  storageLog.refused++;
  const now = Date.now();
  if (now - storageLog.at < 10_000) return;
  req.log.error(
    { err, refused: storageLog.refused },
    'storage refuses writes: requests are answered 503 storage_unavailable until it takes them again',
  );
  storageLog = { at: now, refused: 0 };
}

/**
 * preParsing hook of the partner APIs: bodies are read as sent, so a compressed one would reach
 * the JSON parser as bytes. preParsing runs after every onRequest hook, so the token check
 * (401/403) answers first. (Provider webhooks keep every request, and log this one too.)
 */
export async function refuseEncodedBody(req: FastifyRequest, _reply: FastifyReply, payload: unknown) {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    throw new AppError(
      'unsupported_media_type',
      `Content-Encoding ${encoding} is not supported: send the body uncompressed`,
    );
  }
  return payload;
}
