import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { HttpDeps } from '../../deps.js';
import { completeDocument } from './openapi-contract.js';

// GET /v1/openapi.json (generated from the route schemas) and GET /v1/docs, a page rendered
// on the server from that same document: no scripts, no CDN, readable in any browser or curl.

type Doc = Record<string, any>;

const esc = (s: unknown) =>
  String(s ?? '').replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

const refName = (ref: string) => ref.split('/').pop()!;

/** A schema as indented JSON with $refs turned into links to their section. */
function schemaHtml(schema: unknown): string {
  const json = esc(JSON.stringify(schema, (k, v) => (k === '$schema' ? undefined : v), 2));
  return `<pre>${json.replace(/&quot;\$ref&quot;: &quot;#\/components\/schemas\/(\w+)&quot;/g, (_m, n) => `&quot;$ref&quot;: <a href="#schema-${n}">${n}</a>`)}</pre>`;
}

function operationHtml(path: string, method: string, op: Doc): string {
  const params = (op.parameters ?? []) as Doc[];
  const rows = params
    .map(
      (p) =>
        `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td>${p.required ? 'yes' : ''}</td><td>${esc(p.schema?.type ?? '')}</td><td>${esc(p.description ?? p.schema?.description ?? '')}</td></tr>`,
    )
    .join('');
  const body = op.requestBody?.content?.['application/json']?.schema;
  const responses = Object.entries((op.responses ?? {}) as Record<string, Doc>)
    .map(([code, r]) => {
      const s = r.content?.['application/json']?.schema;
      const shown = !s ? '' : s.$ref ? ` → <a href="#schema-${refName(s.$ref)}">${refName(s.$ref)}</a>` : schemaHtml(s);
      return `<li><code>${esc(code)}</code> ${esc(r.description ?? '')}${shown}</li>`;
    })
    .join('');
  const id = `${method}-${path}`.replace(/[^a-zA-Z0-9]+/g, '-');
  return `<section id="${id}"><h3><span class="m ${method}">${method.toUpperCase()}</span> <code>${esc(path)}</code></h3>
<p><strong>${esc(op.summary ?? '')}</strong></p><p>${esc(op.description ?? '')}</p>
${rows ? `<table><tr><th>parameter</th><th>in</th><th>required</th><th>type</th><th>description</th></tr>${rows}</table>` : ''}
${body ? `<h4>Request body</h4>${schemaHtml(body)}` : ''}
<h4>Responses</h4><ul>${responses}</ul></section>`;
}

export function renderDocs(doc: Doc): string {
  const ops: string[] = [];
  const toc: string[] = [];
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Doc>)) {
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const id = `${method}-${path}`.replace(/[^a-zA-Z0-9]+/g, '-');
      toc.push(
        `<li><a href="#${id}"><span class="m ${method}">${method.toUpperCase()}</span> ${esc(path)}</a> ${esc(op.summary ?? '')}</li>`,
      );
      ops.push(operationHtml(path, method, op));
    }
  }
  const events = Object.entries((doc.webhooks ?? {}) as Record<string, Doc>).map(([type, item]) =>
    operationHtml(type, 'post', item.post),
  );
  const schemas = Object.entries((doc.components?.schemas ?? {}) as Record<string, unknown>)
    .map(([name, s]) => `<section id="schema-${esc(name)}"><h3>${esc(name)}</h3>${schemaHtml(s)}</section>`)
    .join('\n');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>${esc(doc.info?.title)} ${esc(doc.info?.version)}</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}
pre{background:#f6f8fa;padding:.8em;overflow:auto;font-size:13px}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left}
section{border-top:1px solid #eee;padding-top:.5em}.m{font:bold 12px monospace;padding:.1em .4em;border-radius:3px;color:#fff;background:#555}
.get{background:#2b7}.post{background:#27b}.delete{background:#b33}</style></head><body>
<h1>${esc(doc.info?.title)} <small>${esc(doc.info?.version)}</small></h1><p>${esc(doc.info?.description)}</p>
<p>Machine-readable: <a href="openapi.json">openapi.json</a> (OpenAPI ${esc(doc.openapi)}). Authenticate with <code>Authorization: Bearer &lt;token&gt;</code>.</p>
<h2>Endpoints</h2><ul>${toc.join('')}</ul>${ops.join('\n')}
<h2>Webhooks</h2><p>Events msgd POSTs to your endpoints, signed (X-Msgd-Signature and the Standard Webhooks headers).</p>${events.join('\n')}
<h2>Schemas</h2>${schemas}</body></html>`;
}

/**
 * Only the component schemas something refers to: the zod transform registers an input and an
 * output variant of every named schema, and most are used one way only.
 */
export function pruneComponents(doc: Doc): Doc {
  const all = (doc.components?.schemas ?? {}) as Record<string, unknown>;
  const keep = new Set<string>();
  const visit = (v: unknown) => {
    const text = JSON.stringify(v);
    for (const m of text.matchAll(/"#\/components\/schemas\/(\w+)"/g)) {
      if (!keep.has(m[1]) && all[m[1]]) {
        keep.add(m[1]);
        visit(all[m[1]]);
      }
    }
  };
  visit(doc.paths);
  const schemas = Object.fromEntries(
    Object.entries(all)
      .filter(([k]) => keep.has(k))
      .map(([k, v]) => [k, withoutIds(v)]),
  );
  return { ...doc, components: { ...doc.components, schemas } };
}

/**
 * The zod transform leaves "$id": "#/components/schemas/<Name>" on each component. JSON
 * Schema 2020-12 (OpenAPI 3.1's dialect) forbids a fragment in $id, so validators and client
 * generators refuse the document; the component's name is its identity already.
 */
function withoutIds(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(withoutIds);
  if (!v || typeof v !== 'object') return v;
  const out: Doc = {};
  for (const [k, x] of Object.entries(v)) {
    if ((k === '$id' && typeof x === 'string' && x.includes('#')) || k === '$schema') continue;
    out[k] = withoutIds(x);
  }
  return out;
}

export const openapiRoutes: FastifyPluginAsync<{ rt: HttpDeps; root: FastifyInstance }> = async (app, { root }) => {
  let doc: Doc | null = null;
  let html: string | null = null;
  const document = () => (doc ??= completeDocument(pruneComponents((root as any).swagger())));
  app.get('/openapi.json', { schema: { hide: true } }, async (_req, reply) =>
    reply.type('application/json; charset=utf-8').send(document()),
  );
  app.get('/docs', { schema: { hide: true } }, async (_req, reply) => {
    html ??= renderDocs(document());
    return reply
      .type('text/html; charset=utf-8')
      .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'")
      .send(html);
  });
};
