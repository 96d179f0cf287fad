import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

// Secrets at rest: AES-256-GCM under the master key. Sealed form:
// "v1:" + base64(iv[12] | tag[16] | ciphertext). The plaintext is a UTF-8 string (JSON for maps).

const VERSION = 'v1:';

export function seal(key: Buffer, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return VERSION + Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64');
}

export class SecretDecryptError extends Error {
  constructor() {
    super('cannot decrypt a stored secret: the master key does not match the one it was sealed with');
    this.name = 'SecretDecryptError';
  }
}

export function unseal(key: Buffer, sealed: string): string {
  if (!sealed.startsWith(VERSION)) throw new SecretDecryptError();
  const raw = Buffer.from(sealed.slice(VERSION.length), 'base64');
  const iv = raw.subarray(0, 12);
  const tag = raw.subarray(12, 28);
  const ct = raw.subarray(28);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(ct), decipher.final()]).toString('utf8');
  } catch {
    throw new SecretDecryptError();
  }
}

export function sealJson(key: Buffer, value: Record<string, string>): string {
  return seal(key, JSON.stringify(value));
}

export function unsealJson(key: Buffer, sealed: string): Record<string, string> {
  return JSON.parse(unseal(key, sealed));
}
