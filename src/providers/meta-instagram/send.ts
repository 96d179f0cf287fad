import { baseUrl, originPool } from '../http.js';
import { GRAPH_DEFAULT_BASE, graphUrl, postGraph, sendApiBody } from '../graph-send.js';
import { missingSecret, unsupported } from '../send-results.js';
import type { ProviderAdapter } from '../types.js';
import type { MetaInstagramSettings } from './kind.js';

/** Instagram Login flow's host (FACTS B1): the IG account sends itself, with an IG user token. */
export const INSTAGRAM_GRAPH_BASE = 'https://graph.instagram.com';

/** Facebook Login flow (a page_id) sends through the page on graph.facebook.com; Instagram Login on graph.instagram.com. */
export function instagramBase(settings: Pick<MetaInstagramSettings, 'base_url' | 'page_id'>): string {
  return baseUrl(settings, settings.page_id ? GRAPH_DEFAULT_BASE : INSTAGRAM_GRAPH_BASE);
}

export const metaInstagramAdapter: ProviderAdapter<MetaInstagramSettings> = {
  kind: 'meta_instagram',
  callPool: (gw) => originPool(instagramBase(gw.settings)),
  async send(gw, msg, ctx) {
    const token = gw.secrets.access_token;
    if (!token) return missingSecret('access_token');
    if (msg.content.kind !== 'text') return unsupported('Instagram', msg.content.kind);
    // Facebook Login flow sends as the linked page; Instagram Login flow as the IG account itself.
    const sender = gw.settings.page_id || gw.settings.ig_account_id;
    const url = graphUrl(gw.settings, instagramBase(gw.settings), sender);
    const body = sendApiBody(gw.settings, msg.to, msg.content.text);
    return postGraph(ctx, url, token, body, (json) => json?.message_id);
  },
};
