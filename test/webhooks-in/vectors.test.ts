import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { metaMatches, metaSignature } from '../../src/providers/meta-signature.js';
import { verifySendgridSignature } from '../../src/providers/sendgrid/webhook.js';
import { twilioUrlVariants, validateTwilioBody, validateTwilioSignature } from '../../src/providers/twilio/webhook.js';
import type { RawWebhook } from '../../src/providers/webhooks.js';
import { metaHeaders, sendgridSigner, twilioSign } from '../fakes/webhook-senders.js';
import { META_VECTOR, SENDGRID_VECTOR, TWILIO_STATUS_FORM } from '../helpers/vectors.js';

// Every test vector of FACTS.md, against both our verifiers and the test signers (which the
// end-to-end tests then rely on).

const opts = { now: Date.now(), acceptLegacySha1: false, sendgridToleranceSeconds: 600 };
const raw = (body: string, headers: Record<string, string>): RawWebhook => ({
  raw: Buffer.from(body),
  headers,
  path: '/',
  url: 'http://x/',
});

describe('Meta X-Hub-Signature-256 (FACTS A3)', () => {
  it('the signer produces exactly the documented headers for the unicode-escaped body', () => {
    const h = metaHeaders(META_VECTOR.secret, META_VECTOR.body);
    expect(h['x-hub-signature-256']).toBe(META_VECTOR.sha256);
    expect(h['x-hub-signature']).toBe(META_VECTOR.sha1);
  });

  it('verifies the raw bytes and rejects the re-serialised JSON', () => {
    const req = raw(META_VECTOR.body, { 'x-hub-signature-256': META_VECTOR.sha256 });
    const sig = metaSignature(req, opts);
    expect(sig.ok).toBe(true);
    if (!sig.ok) return;
    expect(metaMatches(req, sig.sig, META_VECTOR.secret)).toBe(true);
    expect(metaMatches(req, sig.sig, 'another_secret')).toBe(false);
    const reserialised = JSON.stringify(JSON.parse(META_VECTOR.body));
    expect(reserialised).not.toBe(META_VECTOR.body);
    expect(metaHeaders(META_VECTOR.secret, reserialised)['x-hub-signature-256']).toMatch(/^sha256=3a1152/);
    expect(metaMatches(raw(reserialised, {}), sig.sig, META_VECTOR.secret)).toBe(false);
  });

  it('takes the legacy sha1 header only when configured', () => {
    const req = raw(META_VECTOR.body, { 'x-hub-signature': META_VECTOR.sha1 });
    expect(metaSignature(req, opts)).toMatchObject({ ok: false, reason: expect.stringContaining('acceptLegacySha1') });
    const sig = metaSignature(req, { ...opts, acceptLegacySha1: true });
    expect(sig.ok && metaMatches(req, sig.sig, META_VECTOR.secret)).toBe(true);
    expect(metaSignature(raw('{}', {}), opts)).toEqual({ ok: false, reason: 'missing X-Hub-Signature-256 header' });
  });
});

describe('X-Twilio-Signature (FACTS D4)', () => {
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
  const params = {
    CallSid: 'CA1234567890ABCDE',
    Caller: '+14158675309',
    Digits: '1234',
    From: '+14158675309',
    To: '+18005551212',
  };

  it('official form vector', () => {
    expect(twilioSign('12345', url, params)).toBe('RSOYDt4T1cUTdK1PDd93/VVr8B8=');
    expect(validateTwilioSignature('12345', 'RSOYDt4T1cUTdK1PDd93/VVr8B8=', url, params)).toBe(true);
    expect(validateTwilioSignature('12346', 'RSOYDt4T1cUTdK1PDd93/VVr8B8=', url, params)).toBe(false);
    expect(validateTwilioSignature('12345', 'RSOYDt4T1cUTdK1PDd93/VVr8B8=', url, { ...params, Digits: '1235' })).toBe(
      false,
    );
  });

  it('official bodySHA256 vector', () => {
    const body = '{"property": "value", "boolean": true}';
    const hash = createHash('sha256').update(body).digest('hex');
    expect(hash).toBe('0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620');
    const signed = `${url}&bodySHA256=${hash}`;
    expect(twilioSign('12345', signed, {})).toBe('a9nBmqA0ju/hNViExpshrM61xv4=');
    expect(validateTwilioBody('12345', 'a9nBmqA0ju/hNViExpshrM61xv4=', signed, Buffer.from(body))).toBe(true);
    expect(validateTwilioBody('12345', 'a9nBmqA0ju/hNViExpshrM61xv4=', signed, Buffer.from(body + ' '))).toBe(false);
  });

  it('self-generated status callback vector', () => {
    const p = Object.fromEntries(new URLSearchParams(TWILIO_STATUS_FORM));
    const selfUrl = 'https://gw.example.com/twilio/status?tenant=t1';
    expect(twilioSign('test_auth_token', selfUrl, p)).toBe('bryb0tsnWwiItkL/jRs4EbmKIL4=');
    expect(validateTwilioSignature('test_auth_token', 'bryb0tsnWwiItkL/jRs4EbmKIL4=', selfUrl, p)).toBe(true);
  });

  it('accepts the URL with and without the standard port and with the legacy query encoding', () => {
    expect(twilioUrlVariants('https://a.example/x?q=it%27s')).toEqual(
      expect.arrayContaining([
        'https://a.example/x?q=it%27s',
        'https://a.example:443/x?q=it%27s',
        "https://a.example/x?q=it's",
        "https://a.example:443/x?q=it's",
      ]),
    );
    const withPort = twilioSign('tok', 'https://mycompany.com:443/myapp.php?foo=1&bar=2', params);
    expect(validateTwilioSignature('tok', withPort, url, params)).toBe(true);
    const bare = twilioSign('tok', url, params);
    expect(validateTwilioSignature('tok', bare, 'https://mycompany.com:443/myapp.php?foo=1&bar=2', params)).toBe(true);
    const legacy = twilioSign('tok', "https://mycompany.com/a?name=o'brien", params);
    expect(validateTwilioSignature('tok', legacy, 'https://mycompany.com/a?name=o%27brien', params)).toBe(true);
    expect(validateTwilioSignature('tok', legacy, 'https://mycompany.com/a?name=obrien', params)).toBe(false);
  });

  it('signs repeated params deduplicated and sorted, like twilio-node', () => {
    const a = twilioSign('tok', url, { MediaUrl: ['b', 'a', 'b'] });
    expect(a).toBe(twilioSign('tok', url, { MediaUrl: ['a', 'b'] }));
    expect(validateTwilioSignature('tok', a, url, { MediaUrl: ['b', 'a'] })).toBe(true);
  });
});

describe('SendGrid signed event webhook (FACTS C3)', () => {
  it('official ECDSA vector', () => {
    const v = SENDGRID_VECTOR;
    expect(
      verifySendgridSignature(v.publicKey, v.timestamp, Buffer.from(v.payload), Buffer.from(v.signature, 'base64')),
    ).toBe(true);
    expect(
      verifySendgridSignature(v.publicKey, '1588788368', Buffer.from(v.payload), Buffer.from(v.signature, 'base64')),
    ).toBe(false);
    expect(
      verifySendgridSignature(
        v.publicKey,
        v.timestamp,
        Buffer.from(v.payload + '\r\n'),
        Buffer.from(v.signature, 'base64'),
      ),
    ).toBe(false);
    expect(
      verifySendgridSignature('not a key', v.timestamp, Buffer.from(v.payload), Buffer.from(v.signature, 'base64')),
    ).toBe(false);
    // The same key pasted as PEM, as an operator copying it into a key file would have it.
    const pem = `-----BEGIN PUBLIC KEY-----\n${v.publicKey.match(/.{1,64}/g)!.join('\n')}\n-----END PUBLIC KEY-----\n`;
    expect(verifySendgridSignature(pem, v.timestamp, Buffer.from(v.payload), Buffer.from(v.signature, 'base64'))).toBe(
      true,
    );
  });

  it('the fake signer signs like SendGrid (trailing CRLF included)', () => {
    const s = sendgridSigner();
    expect(s.publicKey).toMatch(/^MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE/);
    expect(s.publicKey).toHaveLength(124);
    const body = '[{"event":"delivered"}]\r\n';
    const h = s.headers(body, '1700000000');
    const sig = Buffer.from(h['x-twilio-email-event-webhook-signature'], 'base64');
    expect(verifySendgridSignature(s.publicKey, '1700000000', Buffer.from(body), sig)).toBe(true);
    expect(verifySendgridSignature(s.publicKey, '1700000000', Buffer.from(body.trim()), sig)).toBe(false);
  });
});
