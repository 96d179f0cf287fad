import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { newSigningSecret } from '../../src/core/endpoints.js';
import {
  DEFAULT_SCHEDULE_MS,
  JITTER,
  nextDelayMs,
  parseRetryAfter,
  scheduleSpanMs,
} from '../../src/webhooks-out/schedule.js';
import {
  PreparedSecrets,
  msgdSignature,
  signatureHeaders,
  standardKey,
  standardSignature,
} from '../../src/webhooks-out/signing.js';
import { configSchema } from '../../src/config/schema.js';

describe('signatures', () => {
  it('matches the official Standard Webhooks vector (FACTS.md section G)', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    expect(
      standardSignature('msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}', standardKey(secret)),
    ).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('X-Msgd-Signature is hex HMAC-SHA256 of the raw body keyed with the secret string', () => {
    const body = '{"id":"evt_1","event":"message.received","body":"héllo"}';
    expect(msgdSignature(body, 'whsec_abc')).toBe(
      'sha256=' + createHmac('sha256', 'whsec_abc').update(Buffer.from(body, 'utf8')).digest('hex'),
    );
  });

  it('new secrets are whsec_ + base64 of 32 random bytes, and verify with the library', () => {
    const s = newSigningSecret();
    expect(s).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(s.slice(6), 'base64')).toHaveLength(32);
    expect(newSigningSecret()).not.toBe(s);
    const ts = Math.floor(Date.now() / 1000);
    const body = '{"a":1}';
    const h = signatureHeaders('evt_x', ts, body, new PreparedSecrets({ current: s, previous: null }));
    expect(new Webhook(s).verify(body, h)).toEqual({ a: 1 });
    expect(h['x-msgd-event-id']).toBe('evt_x');
    expect(h['webhook-timestamp']).toBe(String(ts));
    expect(h['x-msgd-signature-previous']).toBeUndefined();
  });

  it('during a rotation both secrets sign, new first', () => {
    const [a, b] = [newSigningSecret(), newSigningSecret()];
    const ts = Math.floor(Date.now() / 1000);
    const h = signatureHeaders('evt_y', ts, '{}', new PreparedSecrets({ current: b, previous: a }));
    const sigs = h['webhook-signature'].split(' ');
    expect(sigs).toEqual([
      standardSignature('evt_y', ts, '{}', standardKey(b)),
      standardSignature('evt_y', ts, '{}', standardKey(a)),
    ]);
    expect(() => new Webhook(a).verify('{}', h)).not.toThrow();
    expect(() => new Webhook(b).verify('{}', h)).not.toThrow();
    expect(h['x-msgd-signature']).toBe(msgdSignature('{}', b));
    expect(h['x-msgd-signature-previous']).toBe(msgdSignature('{}', a));
  });
});

describe('retry schedule', () => {
  it('defaults to Svix: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (config default too)', () => {
    expect(DEFAULT_SCHEDULE_MS).toEqual([0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
    expect(configSchema.parse({}).webhooksOut.retryScheduleMs).toEqual(DEFAULT_SCHEDULE_MS);
    expect(scheduleSpanMs(DEFAULT_SCHEDULE_MS)).toBe((27 * 60 + 35) * 60_000 + 5_000);
  });

  it('adds at most ±10% jitter, and is used up after the last entry', () => {
    expect(nextDelayMs(DEFAULT_SCHEDULE_MS, 1, { random: () => 0 })).toBe(4500);
    expect(nextDelayMs(DEFAULT_SCHEDULE_MS, 1, { random: () => 1 })).toBe(5500);
    expect(nextDelayMs(DEFAULT_SCHEDULE_MS, 7, { random: () => 0.5 })).toBe(36_000_000);
    expect(nextDelayMs(DEFAULT_SCHEDULE_MS, 8)).toBeNull();
    for (let i = 0; i < 200; i++) {
      const d = nextDelayMs(DEFAULT_SCHEDULE_MS, 2)!;
      expect(d).toBeGreaterThanOrEqual(300_000 * (1 - JITTER));
      expect(d).toBeLessThanOrEqual(300_000 * (1 + JITTER));
    }
  });

  it('Retry-After lengthens a delay but never shortens it', () => {
    expect(nextDelayMs([0, 100], 1, { retryAfterMs: 5000, random: () => 0.5 })).toBe(5000);
    expect(nextDelayMs([0, 100_000], 1, { retryAfterMs: 5000, random: () => 0.5 })).toBe(100_000);
    expect(nextDelayMs([0, 100], 1, { retryAfterMs: 10 * 86_400_000, random: () => 0.5 })).toBe(86_400_000);
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('30', now)).toBe(30_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('soon', now)).toBeNull();
    expect(parseRetryAfter(undefined, now)).toBeNull();
  });
});
