import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { ChannelType } from '../core/context.js';
import type { MessageContent } from '../core/message-content.js';
import type { MessageRow } from '../core/messages.js';
import { AppError, issueDetails } from '../lib/errors.js';
import { refuseOutsideWindow } from '../core/customer-window.js';
import { parseSendAt } from '../core/scheduled.js';
import { accept, canonicalHash, findIdempotent, fundsCheck, preflight, sendCost } from '../core/send.js';
import { iso } from '../lib/time.js';
import { moneyJson } from '../lib/money.js';
import { templatePreflight } from '../core/whatsapp-template-send.js';
import type { Runtime } from '../runtime.js';
import { authenticate } from './auth.js';
import { statusFor } from './errors.js';
import { parseJsonBody } from './json-body.js';
import { houseError } from './schemas/house-errors.js';

// The one send path behind both partner APIs (/api/send-*.php and POST /v1/messages): checks
// in the spec's order — 401 token, 403 suspended/scope/channel, 402 exhausted, 400 payload,
// 402 price — then the money rule (src/core/send.ts). Each surface supplies only
// how its body names the channel, how it becomes a message, and the shape of its answer.
// The body arrives as bytes (src/http/json-body.ts) so even malformed JSON meets the checks in order.

export interface SendPlan {
  to: string;
  content: MessageContent;
  /** The text SMS segments are counted on. */
  priceText?: string;
  /** A scheduled send's time (ms), from the body's send_at. */
  sendAt?: number;
}

export interface SendSpec {
  /** The channel when the body cannot be parsed; null: only the partner-wide checks apply. */
  fixedChannel: ChannelType | null;
  /** The channels the endpoint sends on: with no channel known, 403 unless one of them is assigned. */
  channels: readonly ChannelType[];
  /** The channel a parsed body asks for; null when it names none we know (validation says why). */
  channelOf(body: unknown): ChannelType | null;
  /** Validate (throwing a 400) and build the message. */
  plan(body: unknown, channel: ChannelType | null): SendPlan;
  respond(m: MessageRow): { status: number; body: unknown };
}

export function validate<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    // Every field is then missing: list them, as for an empty object.
    const empty = schema.safeParse({}, { error: houseError });
    throw new AppError(
      'invalid_request',
      'the body must be a JSON object',
      empty.success ? [] : issueDetails(empty.error.issues),
    );
  }
  const parsed = schema.safeParse(body, { error: houseError });
  if (!parsed.success)
    throw new AppError('invalid_request', 'the request is invalid', issueDetails(parsed.error.issues));
  return parsed.data;
}

/** A body's send_at as a time, within config scheduling.*; a 400 naming the field otherwise. */
export function scheduledAt(rt: Runtime, value: string): number {
  const { minAheadSeconds, maxAheadDays } = rt.config.scheduling;
  return parseSendAt(value, rt.ctx.now(), {
    minAheadMs: minAheadSeconds * 1000,
    maxAheadMs: maxAheadDays * 86_400_000,
  });
}

export function idempotencyOf(req: FastifyRequest, body: unknown) {
  const key = req.headers['idempotency-key'];
  if (key === undefined) return undefined;
  if (typeof key !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw new AppError('invalid_request', 'Idempotency-Key must be 1-255 visible ASCII characters', [
      { field: 'Idempotency-Key', message: '1-255 visible ASCII characters' },
    ]);
  }
  return { key, hash: canonicalHash(req.method, req.routeOptions.url ?? req.url, body) };
}

/** Run fn now, but hold a 400 it throws until the checks the spec orders first have run. */
function deferred<T>(fn: () => T): { value?: T; error?: unknown } {
  try {
    return { value: fn() };
  } catch (error) {
    if (error instanceof AppError && statusFor(error.code) === 400) return { error };
    throw error;
  }
}

export async function acceptSend(rt: Runtime, req: FastifyRequest, reply: FastifyReply, spec: SendSpec) {
  const ttlMs = rt.config.idempotency.ttlHours * 3_600_000;
  // 401, and 403 for a suspended partner or a missing scope.
  const principal = authenticate(rt.auth, req, 'messages:send', req.tokenLookup);
  // A malformed body or Idempotency-Key is a 400: it waits for the 403/402 checks below.
  const parsed = deferred(() => parseJsonBody(req.body));
  const idem = parsed.error ? {} : deferred(() => idempotencyOf(req, parsed.value));
  const idempotency = idem.value;
  // A retry of an accepted request gets its first answer even if the money has run out
  // since: the first request was the one that paid.
  if (idempotency) {
    const hit = findIdempotent(rt.ctx, principal.partnerId, idempotency, ttlMs);
    if (hit) return reply.header('idempotent-replayed', 'true').code(hit.status).send(hit.body);
  }
  // 403 channel not assigned / gateway disabled; with no channel named, 403 unless one of the
  // endpoint's is assigned, then 402 funds exhausted.
  const channel = parsed.error ? spec.fixedChannel : spec.channelOf(parsed.value);
  const pre = channel
    ? preflight(rt.ctx, principal, channel)
    : (fundsCheck(rt.ctx, principal, spec.channels), undefined);
  const planned = parsed.error || idem.error ? undefined : deferred(() => spec.plan(parsed.value, channel));
  const invalid = parsed.error ?? idem.error ?? planned?.error;
  if (invalid !== undefined) {
    // 402 funds exhausted comes before 400 in the spec's order. Only a request about to be
    // refused reads the balance for it here; a valid one meets it in the send transaction.
    if (pre) fundsCheck(rt.ctx, principal);
    throw invalid;
  }
  const p = planned!.value!;
  if (!pre) throw new AppError('invalid_request', 'the request names no channel');
  let priced = pre;
  try {
    refuseOutsideWindow(rt.ctx, principal.partnerId, pre.channel, p.to, p.content, p.sendAt);
    priced = templatePreflight(rt.ctx, principal.partnerId, pre, p.to, p.content);
  } catch (e) {
    // A 400 like the payload's: exhausted funds (402) still come first.
    fundsCheck(rt.ctx, principal);
    throw e;
  }
  const result = await accept(rt.acceptDeps, {
    principal,
    preflight: priced,
    to: p.to,
    content: p.content,
    priceText: p.priceText,
    sendAt: p.sendAt,
    idempotency,
    idempotencyTtlMs: ttlMs,
    respond: spec.respond,
  });
  if (result.kind === 'replay') reply.header('idempotent-replayed', 'true');
  return reply.code(result.status).send(result.body);
}

/** A body for a price quote: the send it describes, with its send_at still as written. */
export interface QuotePlan extends Omit<SendPlan, 'sendAt'> {
  channel: ChannelType;
  sendAt?: string;
}

interface Refusal {
  status: number;
  code: string;
  message: string;
  details: { field?: string; message: string; code?: string }[];
}

const refusalOf = (e: AppError): Refusal => ({
  status: statusFor(e.code),
  code: e.code,
  message: e.message,
  details: e.details,
});

/** Run check; an AppError it throws becomes the refusal a send would answer. */
function refusalFrom(check: () => void): Refusal | null {
  try {
    check();
    return null;
  } catch (e) {
    if (e instanceof AppError) return refusalOf(e);
    throw e;
  }
}

/**
 * POST /v1/messages/quote: what the send this body describes would cost and whether it would be
 * accepted now, with the code the send would answer when not. It runs the send's checks in the
 * send's order (channel assigned, funds not exhausted, send_at, the 24-hour window, the price
 * covered) and writes nothing: no message, debit, job or idempotency key. A body the send would
 * refuse as malformed is a 400 here too: there is nothing to price.
 */
export function quoteSend(rt: Runtime, req: FastifyRequest, plan: (body: unknown) => QuotePlan) {
  const principal = authenticate(rt.auth, req, 'messages:send', req.tokenLookup);
  const p = plan(parseJsonBody(req.body));
  const cost = sendCost(rt.ctx, principal.partnerId, p.channel, p.priceText);
  let sendAt: number | undefined;
  const refusal =
    refusalFrom(() => {
      const pre = preflight(rt.ctx, principal, p.channel);
      // Exhausted funds: the 402 a send answers before its payload's checks.
      if (cost.exhausted && cost.fundsRefusal) throw cost.fundsRefusal;
      if (p.sendAt !== undefined) sendAt = scheduledAt(rt, p.sendAt);
      refuseOutsideWindow(rt.ctx, principal.partnerId, pre.channel, p.to, p.content, sendAt);
      if (cost.fundsRefusal) throw cost.fundsRefusal;
    }) ?? null;
  const money = (micro: number) => moneyJson(micro, cost.currency);
  const q = cost.quote;
  return {
    channel: p.channel,
    to: p.to,
    gateway: cost.gateway,
    from: cost.sender,
    send_at: sendAt === undefined ? null : iso(sendAt),
    encoding: q.encoding ?? null,
    segments: q.segments,
    per: p.channel === 'sms' ? 'segment' : 'message',
    unit_price: money(q.unit),
    total: money(q.total),
    currency: cost.currency,
    available: money(cost.available),
    covered: cost.fundsRefusal === null,
    sendable: refusal === null,
    refusal,
  };
}
