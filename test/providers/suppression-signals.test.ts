import { describe, expect, it } from 'vitest';
import { classifyGraphError } from '../../src/providers/graph-send.js';
import { sendgridSuppression } from '../../src/providers/sendgrid/webhook.js';
import { classifySmtpError } from '../../src/providers/smtp/classify.js';
import { classifyTwilioError } from '../../src/providers/twilio/send.js';
import { whatsappWebhook } from '../../src/providers/whatsapp-cloud/webhook.js';

// What each provider's refusal says about the recipient: the adapters and parsers are the only
// place that knows the codes (FACTS A1, B1, C2, D1).

const res = (status: number, json: unknown) => ({ status, headers: {}, text: JSON.stringify(json), json });

describe('provider refusals that suppress the recipient', () => {
  it('Twilio 21610 (replied STOP) suppresses per the opt-out scope; 21211 does not', () => {
    const stop = classifyTwilioError(
      res(400, { code: 21610, message: 'Attempt to send to unsubscribed recipient', status: 400 }),
      0,
    );
    expect(stop).toMatchObject({
      outcome: 'failed',
      code: '21610',
      suppress: { reason: 'provider_refused', scope: 'opt_out' },
    });
    const bad = classifyTwilioError(res(400, { code: 21211, message: 'invalid', status: 400 }), 0);
    expect(bad).not.toHaveProperty('suppress');
  });

  it('Meta 131050 (marketing stopped) and 551 (person unavailable) suppress for the sender; 131026 does not', () => {
    const err = (code: number) => res(400, { error: { message: `(#${code}) x`, type: 'OAuthException', code } });
    expect(classifyGraphError(err(131050), 0)).toMatchObject({
      suppress: { reason: 'provider_refused', scope: 'sender' },
    });
    expect(classifyGraphError(err(551), 0)).toMatchObject({
      suppress: { reason: 'provider_refused', scope: 'sender' },
    });
    expect(classifyGraphError(err(131026), 0)).not.toHaveProperty('suppress');
  });

  it('an SMTP 5.1.x refusal is a hard bounce; another 5xx is not', () => {
    const smtp = (response: string) =>
      classifySmtpError(Object.assign(new Error(response), { responseCode: 550, response, code: 'EENVELOPE' }) as any);
    expect(smtp('550 5.1.1 <x@example.com>: Recipient address rejected: User unknown')).toMatchObject({
      outcome: 'failed',
      suppress: { reason: 'hard_bounce', scope: 'partner' },
    });
    expect(smtp('550 5.7.1 Message rejected as spam')).not.toHaveProperty('suppress');
    expect(smtp('550 15.1.1 odd')).not.toHaveProperty('suppress');
  });

  it('SendGrid: bounce not blocked, dropped for bounced or invalid addresses, spam reports, unsubscribes, groups', () => {
    expect(sendgridSuppression({ event: 'bounce', type: 'bounce' })?.reason).toBe('hard_bounce');
    expect(sendgridSuppression({ event: 'bounce', type: 'blocked' })).toBeUndefined();
    expect(sendgridSuppression({ event: 'dropped', reason: 'Bounced Address' })?.reason).toBe('hard_bounce');
    expect(sendgridSuppression({ event: 'dropped', reason: 'Invalid' })?.reason).toBe('hard_bounce');
    expect(sendgridSuppression({ event: 'dropped', reason: 'Invalid SMTPAPI header' })).toBeUndefined();
    expect(sendgridSuppression({ event: 'dropped', reason: 'Spam Reporting Address' })?.reason).toBe('spam_report');
    expect(sendgridSuppression({ event: 'dropped', reason: 'Unsubscribed Address' })?.reason).toBe('unsubscribe');
    expect(sendgridSuppression({ event: 'spamreport' })?.reason).toBe('spam_report');
    expect(sendgridSuppression({ event: 'unsubscribe' })?.reason).toBe('unsubscribe');
    expect(sendgridSuppression({ event: 'group_unsubscribe', asm_group_id: 7 })).toMatchObject({ groupId: '7' });
    expect(sendgridSuppression({ event: 'group_resubscribe', asm_group_id: 7 })).toMatchObject({
      groupId: '7',
      lift: true,
    });
    expect(sendgridSuppression({ event: 'group_unsubscribe' })).toBeUndefined();
    expect(sendgridSuppression({ event: 'delivered' })).toBeUndefined();
  });

  it('a WhatsApp failed status with 131050 carries the signal', () => {
    const body = JSON.stringify({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: '1',
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: { display_phone_number: '15550783881', phone_number_id: '106540352242922' },
                statuses: [
                  {
                    id: 'wamid.X',
                    status: 'failed',
                    timestamp: '1750857400',
                    recipient_id: '16505551234',
                    errors: [{ code: 131050, title: 'Unable to deliver', message: 'Unable to deliver' }],
                  },
                ],
              },
            },
          ],
        },
      ],
    });
    const req = {
      method: 'POST',
      path: '/api/webhook.php',
      headers: { 'content-type': 'application/json' },
      raw: Buffer.from(body),
    };
    const parsed = whatsappWebhook.parse(req as any);
    const [ev] = whatsappWebhook.events(parsed as any, 0);
    expect(ev).toMatchObject({
      type: 'status',
      status: 'failed',
      suppress: { reason: 'provider_refused', scope: 'sender' },
    });
  });
});
