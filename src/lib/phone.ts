import { parsePhoneNumberFromString } from 'libphonenumber-js/max';

/**
 * A phone number in E.164 with its leading "+", valid for its country by the full
 * (max) metadata. Returns the canonical E.164 form, or null.
 */
export function normalizeE164(input: string): string | null {
  if (typeof input !== 'string' || !/^\+[1-9]\d{1,14}$/.test(input.trim())) return null;
  const parsed = parsePhoneNumberFromString(input.trim(), { extract: false });
  if (!parsed || !parsed.isValid()) return null;
  return parsed.number;
}

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
