import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { ChannelType } from '../core/context.js';
import type { MessageRow } from '../core/messages.js';
import { AppError, issueDetails } from '../lib/errors.js';
import { parseSendAt } from '../core/scheduled.js';
import {
  canonicalHash,
  checkSend,
  coverRefusal,
  sendCost,
  sendMessage,
  type CheckedSend,
  type SendOutcomeKind,
  type SendPlan,
} from '../core/send.js';
import { iso } from '../lib/time.js';
import { formatPrice, moneyJson } from '../lib/money.js';
import type { HttpDeps } from './deps.js';
import { authenticate } from './auth.js';
import { statusFor } from '../web/errors.js';
import { parseJsonBody } from './json-body.js';
import { houseError } from './schemas/house-errors.js';

// The HTTP side of the one send path behind both partner APIs (/api/send-*.php and POST
// /v1/messages): authenticate (401, 403 suspended/scope), read the body, hand the request to
// core's sendMessage (src/core/send.ts), which runs the rest of the spec's order — 403 channel,
// 402 exhausted, 400 payload, 402 price — and the money rule, and shape the answer. Each surface
// supplies only how its body names the channel, how it becomes a message, and its answer's body.
// The body arrives as bytes (src/http/json-body.ts) so even malformed JSON meets the checks in order.

export interface SendSpec {
  /** The channel when the body cannot be parsed; null: only the partner-wide checks apply. */
  fixedChannel: ChannelType | null;
  /** The channels the endpoint sends on: with no channel known, 403 unless one of them is assigned. */
  channels: readonly ChannelType[];
  /** The channel a parsed body asks for; null when it names none we know (validation says why). */
  channelOf(body: unknown): ChannelType | null;
  /** Validate (throwing a 400) and build the message. */
  plan(body: unknown, channel: ChannelType | null): SendPlan;
  /** The answer's body for an accepted message (stored as it is for an Idempotency-Key's replays). */
  render(m: MessageRow): unknown;
}

/** The status each outcome core reports is answered with, on both APIs. */
const OUTCOME_STATUS: Record<SendOutcomeKind, number> = { accepted: 200 };

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
export function scheduledAt(rt: HttpDeps, value: string): number {
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

export async function acceptSend(rt: HttpDeps, req: FastifyRequest, reply: FastifyReply, spec: SendSpec) {
  // 401, and 403 for a suspended partner or a missing scope.
  const principal = await authenticate(rt.auth, req, 'messages:send', req.tokenLookup);
  // A malformed body or Idempotency-Key is a 400: it waits for core's 403/402 checks (build).
  const parsed = deferred(() => parseJsonBody(req.body));
  const idem = parsed.error ? {} : deferred(() => idempotencyOf(req, parsed.value));
  const held = parsed.error ?? idem.error;
  const result = await sendMessage(
    rt.acceptDeps,
    {
      principal,
      channel: parsed.error ? spec.fixedChannel : spec.channelOf(parsed.value),
      channels: spec.channels,
      idempotency: idem.value,
      build: (channel) => {
        if (held !== undefined) throw held;
        return spec.plan(parsed.value, channel);
      },
    },
    spec.render,
  );
  if (result.kind === 'replay') {
    reply.header('idempotent-replayed', 'true');
    return reply.code(OUTCOME_STATUS[result.outcome]).send(result.answer);
  }
  return reply.code(OUTCOME_STATUS.accepted).send(result.answer);
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

/** Run check; an AppError it rejects with becomes the refusal a send would answer. */
async function refusalFrom(check: () => Promise<void>): Promise<Refusal | null> {
  try {
    await check();
    return null;
  } catch (e) {
    if (e instanceof AppError) return refusalOf(e);
    throw e;
  }
}

/**
 * POST /v1/messages/quote: what the send this body describes would cost and whether it would be
 * accepted now, with the code the send would answer when not. It runs the send's checks in the
 * send's order (channel assigned, funds not exhausted, send_at, the suppression list, the 24-hour
 * window, the price covered) and writes nothing: no message, debit, job or idempotency key. A body
 * the send would refuse as malformed is a 400 here too: there is nothing to price.
 */
export async function quoteSend(rt: HttpDeps, req: FastifyRequest, plan: (body: unknown) => QuotePlan) {
  const principal = await authenticate(rt.auth, req, 'messages:send', req.tokenLookup);
  const p = plan(parseJsonBody(req.body));
  const cost = await sendCost(rt.ctx, principal.partnerId, p.channel, p.priceText);
  let sendAt: number | undefined;
  let checked: CheckedSend | undefined;
  // The send's own rules (core's checkSend), then the debit's 402 for a price not covered.
  const refusal = await refusalFrom(async () => {
    checked = await checkSend(rt.ctx, {
      principal,
      channel: p.channel,
      channels: [p.channel],
      build: () => {
        if (p.sendAt !== undefined) sendAt = scheduledAt(rt, p.sendAt);
        return { to: p.to, content: p.content, priceText: p.priceText, sendAt };
      },
    });
    const short = await coverRefusal(rt.ctx, principal.partnerId, checked.quote.total);
    if (short) throw short;
  });
  const money = (micro: number) => moneyJson(micro, cost.currency);
  // A checked send's price includes a WhatsApp template's category price.
  const q = checked?.quote ?? cost.quote;
  const covered = (await coverRefusal(rt.ctx, principal.partnerId, q.total)) === null;
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
    // The total passes 2^53 for a maximal SMS price times its segments: its amount stays exact.
    total: { micro: q.total, amount: formatPrice(q.unit, q.units), currency: cost.currency },
    currency: cost.currency,
    available: money(cost.available),
    covered,
    sendable: refusal === null,
    refusal,
  };
}
