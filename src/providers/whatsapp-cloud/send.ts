import { baseUrl, originPool } from '../http.js';
import { GRAPH_DEFAULT_BASE, graphUrl, postGraph } from '../graph-send.js';
import { missingSecret, unsupported } from '../send-results.js';
import type { OutboundMessage, ProviderAdapter } from '../types.js';
import type { WhatsappCloudSettings } from './kind.js';

function buildBody(msg: OutboundMessage): Record<string, unknown> | null {
  const base = {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    // wa_id form: Meta takes either, but its webhooks report digits only, so send the same.
    to: msg.to.replace(/\D/g, ''),
  };
  const c = msg.content;
  if (c.kind === 'text') {
    return { ...base, type: 'text', text: { body: c.text, preview_url: false } };
  }
  if (c.kind === 'template') {
    const template: Record<string, unknown> = { name: c.template.name, language: { code: c.template.language } };
    if (c.template.components && c.template.components.length > 0) template.components = c.template.components;
    return { ...base, type: 'template', template };
  }
  return null;
}

export const whatsappCloudAdapter: ProviderAdapter<WhatsappCloudSettings> = {
  kind: 'whatsapp_cloud',
  callPool: (gw) => originPool(baseUrl(gw.settings, GRAPH_DEFAULT_BASE)),
  async send(gw, msg, ctx) {
    const token = gw.secrets.access_token;
    if (!token) return missingSecret('access_token');
    const body = buildBody(msg);
    if (!body) return unsupported('WhatsApp', msg.content.kind);
    const url = graphUrl(gw.settings, baseUrl(gw.settings, GRAPH_DEFAULT_BASE), gw.settings.phone_number_id);
    return postGraph(ctx, url, token, body, (json) => json?.messages?.[0]?.id);
  },
};
