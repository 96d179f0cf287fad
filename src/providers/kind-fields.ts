import { z } from 'zod';

// Setting fields more than one gateway kind takes (src/providers/<kind>/kind.ts).

export const url = z.url({ protocol: /^https?$/ });

// Settings arrive as JSON values or as strings from the command line: "false" must mean false
// (z.coerce.boolean would read any non-empty string as true) and "" must not become 0.
const TRUE = ['true', 'yes', 'on', '1'];
const FALSE = ['false', 'no', 'off', '0'];
export const bool = z.unknown().transform((v, ctx) => {
  if (typeof v === 'boolean') return v;
  const s = typeof v === 'string' ? v.trim().toLowerCase() : undefined;
  if (s !== undefined && TRUE.includes(s)) return true;
  if (s !== undefined && FALSE.includes(s)) return false;
  ctx.addIssue({ code: 'custom', message: `expected true or false, got ${JSON.stringify(v)}` });
  return z.NEVER;
});

export const num = (min: number, max: number, opts: { integer?: boolean } = {}) =>
  z.unknown().transform((v, ctx) => {
    const shape = opts.integer ? /^-?\d+$/ : /^-?\d+(\.\d+)?$/;
    const n = typeof v === 'number' ? v : typeof v === 'string' && shape.test(v.trim()) ? Number(v) : NaN;
    if (!Number.isFinite(n) || (opts.integer && !Number.isInteger(n))) {
      ctx.addIssue({ code: 'custom', message: `expected a number, got ${JSON.stringify(v)}` });
      return z.NEVER;
    }
    if (n < min || n > max) {
      ctx.addIssue({ code: 'custom', message: `expected a number from ${min} to ${max}, got ${n}` });
      return z.NEVER;
    }
    return n;
  });

export const int = (min: number, max: number) => num(min, max, { integer: true });

/** Messages per second: a fraction is fine (Twilio long codes: 1/s, or 0.5/s). */
export const rate = num(0.001, 100_000).optional();
