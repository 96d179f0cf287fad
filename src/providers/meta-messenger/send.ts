import { baseUrl } from '../http.js';
import { GRAPH_DEFAULT_BASE, graphUrl, postGraph } from '../graph-send.js';
import { missingSecret, unsupported } from '../send-results.js';
import type { ProviderAdapter } from '../types.js';

export const metaMessengerAdapter: ProviderAdapter = {
  kind: 'meta_messenger',
  async send(gw, msg, ctx) {
    const token = gw.secrets.page_access_token;
    if (!token) return missingSecret('page_access_token');
    if (msg.content.kind !== 'text') return unsupported('Messenger', msg.content.kind);
    const messagingType = typeof gw.settings.messaging_type === 'string' ? gw.settings.messaging_type : 'RESPONSE';
    const body: Record<string, unknown> = {
      recipient: { id: msg.to },
      messaging_type: messagingType,
      message: { text: msg.content.text },
    };
    // Outside the 24 h window only a tagged message goes through; the tag is the operator's choice.
    if (messagingType === 'MESSAGE_TAG' && gw.settings.tag) body.tag = gw.settings.tag;
    const url = graphUrl(gw.settings, baseUrl(gw.settings, GRAPH_DEFAULT_BASE), String(gw.settings.page_id));
    return postGraph(ctx, url, token, body, (json) => json?.message_id);
  },
};
