import { describe, expect, it } from 'vitest';
import { countsAgainstGateway, failoverVerdict } from '../../src/providers/failover-codes.js';
import { classifySmtpError } from '../../src/providers/smtp/classify.js';

// What an SMTP relay's transient reply to RCPT TO says: about the recipient, or about the relay.

const rcpt = (responseCode: number, response: string) =>
  classifySmtpError(
    Object.assign(new Error(response), { responseCode, response, code: 'EENVELOPE', command: 'RCPT TO' }) as any,
  );

describe('SMTP deferrals at RCPT TO', () => {
  it("greylisting or a full mailbox is the recipient's: retried on the same gateway, a working relay", () => {
    for (const r of [
      rcpt(450, '450 4.2.0 <a@example.com>: Recipient address rejected: Greylisted'),
      rcpt(451, '451 4.7.1 Please try again later'),
      rcpt(452, '452 4.2.2 The email account that you tried to reach is over quota'),
    ]) {
      expect(r.outcome).toBe('retry');
      expect(failoverVerdict('smtp', r)).toBe('recipient_deferred');
      expect(countsAgainstGateway('smtp', r)).toBe(false);
    }
  });

  it('421 closes the session: the relay is not taking mail, whatever the command', () => {
    const r = rcpt(421, '421 4.3.2 Service shutting down, closing transmission channel');
    expect(failoverVerdict('smtp', r)).toBe('not_accepted');
    expect(countsAgainstGateway('smtp', r)).toBe(true);
  });
});
