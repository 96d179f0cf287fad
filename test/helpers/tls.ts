import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// A throwaway self-signed certificate for 127.0.0.1 and localhost, made by openssl, for the
// HTTPS webhook receivers and the SMTP server's STARTTLS. msgd trusts it through a CA file.

export interface TlsFiles {
  dir: string;
  key: string;
  cert: string;
  cleanup(): void;
}

export function makeCert(): TlsFiles {
  const dir = mkdtempSync(join(tmpdir(), 'msgd-tls-'));
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=localhost',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { dir, key, cert, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}
