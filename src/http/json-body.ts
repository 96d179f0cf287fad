import type { FastifyInstance } from 'fastify';
import { AppError } from '../lib/errors.js';

// JSON bodies of the partner APIs (send API and /v1). They arrive as bytes and are decoded and
// parsed by the route, after authentication and the checks the spec orders before a 400, so
// a malformed body never outranks a 401/403/402. Only the media type and its charset are
// judged on arrival (415).

const UTF8_LABELS = new Set(['utf-8', 'utf8']);

/** The charset parameter of a Content-Type, lower case and unquoted; undefined when absent. */
export function charsetOf(contentType: string | undefined): string | undefined {
  for (const param of (contentType ?? '').split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    return param
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
  }
  return undefined;
}

/**
 * Take application/json only (anything else is 415, text/plain included: without removing the
 * defaults it would reach the route as a string), in UTF-8 only: a body declared in another
 * charset would be decoded wrongly, so it is refused rather than guessed at.
 */
export function acceptJsonBodies(app: FastifyInstance) {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const charset = charsetOf(req.headers['content-type']);
    if (charset !== undefined && !UTF8_LABELS.has(charset)) {
      return done(
        new AppError(
          'unsupported_media_type',
          `charset ${charset} is not supported: send the JSON as UTF-8 (charset=utf-8, or no charset)`,
        ),
        undefined,
      );
    }
    done(null, body);
  });
}

/** How deep a partner's JSON may nest: far beyond any request shape, short of what recursion and clients choke on. */
export const MAX_JSON_DEPTH = 32;

// A lone UTF-16 surrogate: valid in JSON text (\ud800), not valid Unicode, and SQLite would
// store it as U+FFFD, so what is read back would differ from what was accepted.
const LONE_SURROGATE = /\p{Cs}/u;

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** The body's text: UTF-8, a leading BOM dropped (RFC 8259 §8.1 lets a parser ignore it). */
export function decodeBody(raw: Buffer): string {
  try {
    return UTF8.decode(raw);
  } catch {
    throw new AppError('invalid_json', 'the body is not valid UTF-8: send JSON encoded as UTF-8');
  }
}

/** Decode (a Buffer from jsonBodies) and parse a partner's JSON body; a 400 invalid_json when it is not. */
export function parseJsonBody(body: unknown): unknown {
  const raw = Buffer.isBuffer(body) ? decodeBody(body) : body;
  if (typeof raw !== 'string') return raw;
  if (raw.trim() === '') throw new AppError('invalid_json', 'the body is empty; send a JSON object');
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new AppError('invalid_json', 'the body is not valid JSON');
  }
  checkJsonValue(value);
  return value;
}

/**
 * A string or key of the body: no unpaired UTF-16 surrogate, no NUL. NUL (\u0000) is valid JSON
 * and Unicode, but no text a provider sends, and C string handling (SQLite's text functions,
 * mail headers) ends a string there.
 */
function checkText(s: string, what: 'string' | 'key', example = '') {
  if (LONE_SURROGATE.test(s))
    throw new AppError(
      'invalid_json',
      `the body has a ${what} with an unpaired UTF-16 surrogate${example}: not valid Unicode`,
    );
  if (s.includes('\0'))
    throw new AppError(
      'invalid_json',
      `the body has a ${what} with a NUL character (\\u0000), which msgd does not take`,
    );
}

/** Depth and Unicode checks over a parsed body, without recursion (a deep body must not blow the stack). */
function checkJsonValue(root: unknown) {
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v === 'string') {
      checkText(v, 'string', ' (e.g. \\ud800 alone)');
      continue;
    }
    // 1e400 parses as Infinity, which would be stored as null (JSON has no Infinity): refused
    // rather than kept as something else than was sent.
    if (typeof v === 'number' && !Number.isFinite(v))
      throw new AppError('invalid_json', 'the body has a number too large to read (beyond ±1.8e308)');
    if (typeof v !== 'object' || v === null) continue;
    if (depth > MAX_JSON_DEPTH)
      throw new AppError('invalid_json', `the body nests deeper than ${MAX_JSON_DEPTH} levels`);
    if (Array.isArray(v)) {
      for (const item of v) stack.push([item, depth + 1]);
    } else {
      for (const [k, item] of Object.entries(v)) {
        checkText(k, 'key');
        stack.push([item, depth + 1]);
      }
    }
  }
}
