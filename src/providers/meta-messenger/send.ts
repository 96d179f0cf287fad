import { baseUrl, originPool } from '../http.js';
import { GRAPH_DEFAULT_BASE, graphUrl, postGraph, sendApiBody } from '../graph-send.js';
import { missingSecret, unsupported } from '../send-results.js';
import type { ProviderAdapter } from '../types.js';
import type { MetaMessengerSettings } from './kind.js';

export const metaMessengerAdapter: ProviderAdapter<MetaMessengerSettings> = {
  kind: 'meta_messenger',
  callPool: (gw) => originPool(baseUrl(gw.settings, GRAPH_DEFAULT_BASE)),
  async send(gw, msg, ctx) {
    const token = gw.secrets.page_access_token;
    if (!token) return missingSecret('page_access_token');
    if (msg.content.kind !== 'text') return unsupported('Messenger', msg.content.kind);
    const body = sendApiBody(gw.settings, msg.to, msg.content.text);
    const url = graphUrl(gw.settings, baseUrl(gw.settings, GRAPH_DEFAULT_BASE), gw.settings.page_id);
    return postGraph(ctx, url, token, body, (json) => json?.message_id);
  },
};
