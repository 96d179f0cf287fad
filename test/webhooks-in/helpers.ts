import { waitFor as waitForShared } from '../helpers/wait.js';
import type { CoreCtx } from '../../src/core/context.js';
import { getWebhookLog, type WebhookLogRow } from '../../src/core/webhook-log.js';

// The facts from FACTS.md A3, byte for byte.
export const META_VECTOR = {
  secret: 'test_app_secret',
  body: '{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"contacts":[{"profile":{"name":"J\\u00fcrgen"},"wa_id":"16505551234"}],"messages":[{"from":"16505551234","id":"wamid.TEST1","timestamp":"1739321024","type":"text","text":{"body":"Gr\\u00fc\\u00df dich"}}]},"field":"messages"}]}]}',
  sha256: 'sha256=c73ec124ec29ef1b982ad9192ee0cd75f52f32f81b692cfb9133d50e511d7cf2',
  sha1: 'sha1=df1b0b60f3b3e0a3fe94e1c6f225184044c678b5',
};

// FACTS.md C3, the official @sendgrid/eventwebhook vector.
export const SENDGRID_VECTOR = {
  publicKey:
    'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==',
  timestamp: '1588788367',
  payload: '{"category":"example_payload","event":"test_event","message_id":"message_id"}',
  signature: 'MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0=',
};

// FACTS.md D2/D4.
export const TWILIO_STATUS_FORM =
  'AccountSid=AC00000000000000000000000000000000&ApiVersion=2010-04-01&From=%2B15017250604&MessageSid=SM11111111111111111111111111111111&MessageStatus=delivered&SmsSid=SM11111111111111111111111111111111&SmsStatus=delivered&To=%2B15558675310&RawDlrDoneDate=2508171206';

export { sleep } from '../helpers/wait.js';

/** The shared poller, with this suite's argument order (what before timeout). */
export function waitFor<T>(fn: () => T | undefined | null | false, what: string, timeoutMs = 10_000): Promise<T> {
  return waitForShared(fn, timeoutMs, what, 20) as Promise<T>;
}

/** The log row once its processing job has settled it. */
export function processed(ctx: CoreCtx, id: string, timeoutMs = 15_000): Promise<WebhookLogRow> {
  return waitFor(
    () => {
      const r = getWebhookLog(ctx, id);
      return r && r.processing !== 'pending' ? r : undefined;
    },
    `webhook ${id} to be processed`,
    timeoutMs,
  );
}

export function row(ctx: CoreCtx, id: string): WebhookLogRow {
  const r = getWebhookLog(ctx, id);
  if (!r) throw new Error(`no webhook log row ${id}`);
  return r;
}

/** The newest log row (for requests whose answer carries no id in the body). */
export function lastRow(ctx: CoreCtx): WebhookLogRow {
  return ctx.db.sqlite.prepare('SELECT * FROM provider_webhooks ORDER BY id DESC LIMIT 1').get() as WebhookLogRow;
}
