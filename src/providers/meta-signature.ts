import { header, hmacEquals, type RawWebhook, type SignatureCheck, type VerifyOptions } from './webhook-common.js';

// Meta signs WhatsApp, Messenger and Instagram webhooks alike: X-Hub-Signature-256 is the
// HMAC-SHA256 of the raw body with the app secret (FACTS A3, B3). The body is an escaped
// ASCII rendering (ä as \u00e4), so re-serialised JSON never verifies: always the raw bytes.
// Meta writes the MAC in lowercase hex, and only that form is taken: a signature in any other
// spelling did not come from Meta, so it is refused before a secret is tried.

export interface MetaSignature {
  algo: 'sha256' | 'sha1';
  mac: Buffer;
}

const SHA256 = /^sha256=([0-9a-f]{64})$/;
const SHA1 = /^sha1=([0-9a-f]{40})$/;

export function metaSignature(req: RawWebhook, opts: VerifyOptions): SignatureCheck<MetaSignature> {
  const v256 = header(req, 'x-hub-signature-256');
  if (v256 !== undefined) {
    const m = SHA256.exec(v256.trim());
    if (!m)
      return { ok: false, reason: 'malformed X-Hub-Signature-256 header (expected sha256=<64 lowercase hex digits>)' };
    return { ok: true, sig: { algo: 'sha256', mac: Buffer.from(m[1], 'hex') } };
  }
  const v1 = header(req, 'x-hub-signature');
  if (v1 === undefined) return { ok: false, reason: 'missing X-Hub-Signature-256 header' };
  if (!opts.acceptLegacySha1) {
    return {
      ok: false,
      reason: 'only the legacy X-Hub-Signature (sha1) was sent and webhooksIn.acceptLegacySha1 is off',
    };
  }
  const m = SHA1.exec(v1.trim());
  if (!m) return { ok: false, reason: 'malformed X-Hub-Signature header (expected sha1=<40 lowercase hex digits>)' };
  return { ok: true, sig: { algo: 'sha1', mac: Buffer.from(m[1], 'hex') } };
}

export function metaMatches(req: RawWebhook, sig: MetaSignature, appSecret: string): boolean {
  return hmacEquals(sig.algo, appSecret, req.raw, sig.mac);
}
