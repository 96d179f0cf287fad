import { META_KINDS } from './settings.js';
import { metaMatches, metaSignature, type MetaSignature } from '../meta-signature.js';
import { isObject, jsonBody, note, str, type WebhookHandler } from '../webhook-common.js';

// Meta webhooks for objects msgd does not act on (an app also subscribed to `user`,
// `permissions`, `page` feed changes under another object name…): {object, entry[]} signed
// like every Meta webhook. Answering 400 would make Meta retry for days and flag the app's
// webhook as failing, so they are verified with any Meta gateway's app secret, stored, answered
// 200 and marked ignored. Asked after the WhatsApp, Messenger and Instagram handlers.

type Notification = { object: string; entry: unknown[] };

const ACTED_ON = new Set(['whatsapp_business_account', 'page', 'instagram']);

function notification(j: unknown): Notification | null {
  if (!isObject(j) || typeof j.object !== 'string' || ACTED_ON.has(j.object) || !Array.isArray(j.entry)) return null;
  return j as Notification;
}

export const metaAppWebhook: WebhookHandler<Notification, MetaSignature> = {
  provider: 'meta',
  kinds: META_KINDS,
  secretName: 'app_secret',
  // Only with Meta's signature header: a bare {object, entry} from anyone else stays unknown.
  parse: (req) =>
    req.headers['x-hub-signature-256'] !== undefined || req.headers['x-hub-signature'] !== undefined
      ? notification(jsonBody(req))
      : null,
  hints: () => [],
  signature: metaSignature,
  matches: (req, _p, sig, secret) => metaMatches(req, sig, secret),
  events(n) {
    const fields = new Set<string>();
    for (const e of n.entry) {
      for (const c of isObject(e) && Array.isArray(e.changes) ? e.changes : []) {
        const f = str(isObject(c) ? c.field : undefined);
        if (f) fields.add(f);
      }
    }
    return [note(`Meta "${n.object}" webhook${fields.size ? ` (${[...fields].join(', ')})` : ''} is not used by msgd`)];
  },
};
