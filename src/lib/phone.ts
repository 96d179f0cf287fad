import { parsePhoneNumberFromString } from 'libphonenumber-js/max';

/**
 * A phone number in E.164 with its leading "+", valid for its country by the full
 * (max) metadata. Returns the canonical E.164 form, or null.
 */
export function normalizeE164(input: string): string | null {
  if (typeof input !== 'string') return null;
  const trimmed = input.trim();
  if (!/^\+[1-9]\d{1,14}$/.test(trimmed)) return null;
  // Parsing with the full metadata is most of a send's validation; partners send to the same
  // numbers again and again, and the answer for a string never changes.
  const known = recent.get(trimmed);
  if (known !== undefined) return known;
  const parsed = parsePhoneNumberFromString(trimmed, { extract: false });
  const result = parsed && parsed.isValid() ? parsed.number : null;
  if (recent.size >= RECENT_MAX) recent.delete(recent.keys().next().value!);
  recent.set(trimmed, result);
  return result;
}

/** Numbers checked lately (oldest first), with their E.164 form or null when invalid. */
const recent = new Map<string, string | null>();
const RECENT_MAX = 10_000;

/** Meta wa_id / from: digits without "+". */
export function fromWaId(digits: string): string {
  return digits.startsWith('+') ? digits : `+${digits}`;
}

/**
 * For the operator's own sender numbers: E.164 format and a possible length for the
 * country. Providers hand out test and short-lived numbers (e.g. +1 555 ...) that the
 * full metadata does not list as valid, and the operator knows their own number.
 */
export function normalizeSenderE164(input: string): string | null {
  if (typeof input !== 'string' || !/^\+[1-9]\d{1,14}$/.test(input.trim())) return null;
  const parsed = parsePhoneNumberFromString(input.trim(), { extract: false });
  if (!parsed || !parsed.isPossible()) return null;
  return parsed.number;
}
