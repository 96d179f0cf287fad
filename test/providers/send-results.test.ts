import { describe, expect, it } from 'vitest';
import { redactSecrets } from '../../src/providers/send-results.js';

describe('redactSecrets', () => {
  const secrets = {
    auth_token: 'twilio_auth_token_1',
    api_key_secret: 'k3y_s3cr3t_value',
    verify_token: 'hello123',
    short: 'abc',
  };

  it('takes out credentials, their base64 and Basic/Bearer tokens', () => {
    const basic = Buffer.from('AC123:twilio_auth_token_1').toString('base64');
    expect(redactSecrets(`Authenticate Basic ${basic} (token twilio_auth_token_1)`, secrets)).toBe(
      'Authenticate Basic [redacted] (token [redacted])',
    );
    expect(redactSecrets('Bearer EAAB1234xyz is invalid', secrets)).toBe('Bearer [redacted] is invalid');
    expect(redactSecrets(`authorization: basic\t${basic}`, secrets)).toBe('authorization: basic [redacted]');
    expect(redactSecrets('smtp auth failed for pass s3cr3t', { password: 's3cr3t' })).toBe(
      'smtp auth failed for pass [redacted]',
    );
    expect(redactSecrets(`echo ${Buffer.from('k3y_s3cr3t_value').toString('base64')}`, secrets)).toBe(
      'echo [redacted]',
    );
  });

  it('leaves ordinary words alone: "Basic authentication", a verify token, short secrets', () => {
    for (const text of [
      'Basic authentication is required',
      'The basic messaging permission is missing',
      'Bearer authorization failed',
      'hello123 world',
      'abc def',
    ]) {
      expect(redactSecrets(text, secrets)).toBe(text);
    }
  });
});
