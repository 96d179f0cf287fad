import { describe, expect, it } from 'vitest';
import { checkPasswordRules, passwordContext } from '../../src/core/passwords.js';

// Console passwords: long enough, and not one an attacker would try early (NIST SP 800-63B).

const refusal = (password: string, context: string[] = []) =>
  checkPasswordRules(password, context).then(
    () => null,
    (e: Error) => e.message,
  );

describe('password rules', () => {
  it('refuse common, repeated and context-specific passwords, saying why', async () => {
    const context = passwordContext('ann.lee@acme.example', ['Acme Ltd', 'acme']);
    expect(await refusal(' '.repeat(12))).toMatch(/^this password is too easy to guess\. Repeated characters/);
    expect(await refusal('aaaaaaaaaaaa')).toMatch(/too easy to guess/);
    expect(await refusal('ann.lee@acme.example', context)).toContain(
      'There should not be any personal or page related data.',
    );
    expect(await refusal('acmeltd2026!', context)).toMatch(/too easy to guess/);
    expect(await refusal('P@ssw0rd1234')).toMatch(/too easy to guess/);
    expect(await refusal('short')).toBe('the password must be at least 12 characters');
  });

  it('take a good passphrase, and judge a long password quickly', async () => {
    expect(await refusal('violet tram ladder oyster', passwordContext('ann@acme.example', ['Acme']))).toBeNull();
    const symbols = Array.from({ length: 256 }, (_, i) => String.fromCharCode(33 + ((i * 13) % 90))).join('');
    const t0 = performance.now();
    expect(await refusal(symbols)).toBeNull();
    // Seconds with the estimator's defaults; a fraction of that as configured (a loaded machine allowed for).
    expect(performance.now() - t0).toBeLessThan(1500);
  });
});
