import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

// The SHA-256 of https://www.apache.org/licenses/LICENSE-2.0.txt, the text as the Apache
// Software Foundation publishes it (also Debian's /usr/share/common-licenses/Apache-2.0).
const APACHE_2_0_SHA256 = 'cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30';

describe('the licence', () => {
  it('LICENSE is the Apache License 2.0, word for word, and package.json names it', () => {
    const text = readFileSync(join(ROOT, 'LICENSE'));
    expect(createHash('sha256').update(text).digest('hex')).toBe(APACHE_2_0_SHA256);
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.license).toBe('Apache-2.0');
  });

  it('SECURITY.md and CHANGELOG.md are there, the changelog at the package version', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    const changelog = readFileSync(join(ROOT, 'CHANGELOG.md'), 'utf8');
    expect(changelog).toMatch(/^## \[Unreleased\]$/m);
    expect(changelog).toMatch(
      new RegExp(`^## \\[${pkg.version.replace(/\./g, '\\.')}\\] - \\d{4}-\\d{2}-\\d{2}$`, 'm'),
    );
    expect(readFileSync(join(ROOT, 'SECURITY.md'), 'utf8')).toMatch(/Report a vulnerability/);
  });
});
