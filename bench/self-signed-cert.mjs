// A throwaway self-signed certificate for 127.0.0.1 and localhost, made by openssl, for the
// HTTPS webhook receivers of the bench and the docs screenshots; msgd trusts it as its CA file.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/** Writes key.pem and cert.pem into dir and returns their paths. */
export function selfSignedCert(dir) {
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
  return { key, cert };
}
