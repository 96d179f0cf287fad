import type { CatalogueTemplate, TemplateSpec } from '../../core/whatsapp-templates.js';
import { GRAPH_DEFAULT_BASE } from '../graph-send.js';
import { GRAPH_API_VERSION } from '../meta-app/settings.js';
import { baseUrl, callProvider, isResponse, truncate } from '../http.js';
import type { GatewayRuntime, SendContext } from '../types.js';

// Meta's template catalogue of a WhatsApp Business Account: GET /{waba_id}/message_templates,
// cursor-paged like every Graph edge ({data, paging: {cursors: {before, after}, next}}; no
// `next` on the last page). The access token goes in the Authorization header, never in a URL:
// Meta's own paging.next carries it as a query parameter, so msgd pages by the `after` cursor
// on its own URL instead of following that link (nothing with the token ever reaches a log).

const FIELDS = 'id,name,language,status,category,parameter_format,components';
const PAGE_SIZE = 100;
/** A WABA holds at most a few thousand templates: far more pages means a cursor that loops. */
const MAX_PAGES = 500;

export type CatalogueResult = { ok: true; templates: CatalogueTemplate[] } | { ok: false; error: string };

const isObj = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The variables of a template text: {{1}}, {{2}} or {{first_name}}, each once, in order. */
function variables(text: unknown): string[] {
  if (typeof text !== 'string') return [];
  const out: string[] = [];
  for (const m of text.matchAll(/\{\{\s*([A-Za-z0-9_]+)\s*\}\}/g)) if (!out.includes(m[1])) out.push(m[1]);
  return out;
}

const MEDIA_HEADERS = new Set(['image', 'video', 'document', 'location']);

/** Buttons every send gives one parameter for (besides a URL button with a variable). */
const ONE_PARAMETER = new Set(['copy_code', 'otp', 'mpm', 'order_details']);

/** Meta's components, as the parameters a send must give. */
export function templateSpec(components: unknown, parameterFormat: unknown): TemplateSpec {
  const spec: TemplateSpec = {
    format: String(parameterFormat ?? '').toLowerCase() === 'named' ? 'named' : 'positional',
    header: null,
    body: [],
    buttons: [],
  };
  for (const c of Array.isArray(components) ? components.filter(isObj) : []) {
    const type = String(c.type ?? '').toLowerCase();
    if (type === 'header') {
      const format = String(c.format ?? 'text').toLowerCase();
      if (MEDIA_HEADERS.has(format)) spec.header = { kind: 'media', type: format };
      else if (format === 'text') {
        const params = variables(c.text);
        spec.header = params.length ? { kind: 'text', params } : null;
      } else spec.unchecked = true;
    } else if (type === 'body') {
      spec.body = variables(c.text);
    } else if (type === 'buttons') {
      (Array.isArray(c.buttons) ? c.buttons.filter(isObj) : []).forEach((b, index) => {
        const bt = String(b.type ?? '').toLowerCase();
        // A URL button with a variable, a coupon code, an authentication code, a multi-product
        // message's products or an order to pay (its action): one parameter each.
        const params = bt === 'url' ? Math.min(1, variables(b.url).length) : ONE_PARAMETER.has(bt) ? 1 : 0;
        spec.buttons.push({ index, type: bt, params });
      });
    } else if (type !== 'footer') {
      // Carousels, limited-time offers and what Meta adds next: left to Meta to check.
      spec.unchecked = true;
    }
  }
  return spec;
}

function catalogueTemplate(t: Record<string, any>): CatalogueTemplate | null {
  if (typeof t.name !== 'string' || typeof t.language !== 'string' || typeof t.status !== 'string') return null;
  return {
    metaId: typeof t.id === 'string' || typeof t.id === 'number' ? String(t.id) : null,
    name: t.name,
    language: t.language,
    status: t.status,
    category: typeof t.category === 'string' ? t.category : '',
    components: Array.isArray(t.components) ? t.components : [],
    spec: templateSpec(t.components, t.parameter_format),
  };
}

function graphError(status: number, json: any, text: string): string {
  const e = json?.error;
  if (!isObj(e)) return `HTTP ${status}: ${truncate(text) || 'empty body'}`;
  const details = e.error_data?.details ? `: ${String(e.error_data.details)}` : '';
  return truncate(`HTTP ${status}, Graph error ${e.code ?? '?'}: ${String(e.message ?? '')}${details}`, 500);
}

/** Every page of the WABA's catalogue, or why it could not be read (no secret in it). */
export async function fetchCatalogue(gw: GatewayRuntime, ctx: SendContext): Promise<CatalogueResult> {
  const token = gw.secrets.access_token;
  if (!token) return { ok: false, error: 'the gateway has no access_token secret' };
  const waba = gw.settings.waba_id;
  if (typeof waba !== 'string' || waba === '')
    return { ok: false, error: 'the gateway has no waba_id setting: set it to the WhatsApp Business Account id' };
  const version = typeof gw.settings.api_version === 'string' ? gw.settings.api_version : GRAPH_API_VERSION;
  const root = `${baseUrl(gw.settings, GRAPH_DEFAULT_BASE)}/${encodeURIComponent(version)}/${encodeURIComponent(waba)}/message_templates`;
  const templates: CatalogueTemplate[] = [];
  const seen = new Set<string>();
  let after: string | null = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const q = new URLSearchParams({ fields: FIELDS, limit: String(PAGE_SIZE) });
    if (after) q.set('after', after);
    const res = await callProvider(ctx, {
      url: `${root}?${q}`,
      method: 'GET',
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    });
    if (!isResponse(res)) return { ok: false, error: `Graph did not answer: ${res.message}` };
    if (res.status < 200 || res.status >= 300) return { ok: false, error: graphError(res.status, res.json, res.text) };
    const j = res.json;
    if (!isObj(j) || !Array.isArray(j.data))
      return { ok: false, error: `HTTP ${res.status} without a data list: ${truncate(res.text)}` };
    for (const t of j.data) {
      const c = isObj(t) ? catalogueTemplate(t) : null;
      if (c) templates.push(c);
    }
    const next = isObj(j.paging) ? j.paging : undefined;
    const cursor = next?.cursors?.after;
    if (!next?.next || typeof cursor !== 'string' || cursor === '') return { ok: true, templates };
    if (seen.has(cursor)) return { ok: false, error: `Graph returned the cursor ${truncate(cursor, 40)} twice` };
    seen.add(cursor);
    after = cursor;
  }
  return { ok: false, error: `more than ${MAX_PAGES} pages of templates` };
}
