import type { Row } from '../db/rows.js';
import type { whatsappTemplateSyncs, whatsappTemplates } from '../db/schema.js';
import { inList, jsonText } from '../db/dialect.js';
import type { Queryable } from '../db/query.js';
import { sql, type Sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import { AppError, type ErrorDetail } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import type { CoreCtx, GatewayKind } from './context.js';

// The WhatsApp template catalogue of each WhatsApp Cloud gateway, as data: the provider layer
// reads Meta's catalogue and turns each template's components into a TemplateSpec (what a send
// must give); this file stores it, applies Meta's status and category webhooks, and refuses a
// template send that Meta would refuse after the debit. A gateway never synced is not checked.
// The catalogue's writes and reads go through the store; applyTemplateChange() (in the webhook
// processing transaction) and checkTemplate() (in the send's accept) run on the connection,
// inside those synchronous transactions.

export type TemplateRow = Row<typeof whatsappTemplates>;
export type TemplateSyncRow = Row<typeof whatsappTemplateSyncs>;

/** The parameters a send of a template must give, per component. Names: "1", "2"... when positional. */
export interface TemplateSpec {
  format: 'positional' | 'named';
  /** null: no header, or one without parameters. */
  header: { kind: 'text'; params: string[] } | { kind: 'media'; type: string } | null;
  body: string[];
  /** Every button, by its index; `params`: how many parameters a send must give for it. */
  buttons: { index: number; type: string; params: number }[];
  /** Components msgd does not model (carousels, limited-time offers): parameters are Meta's to check. */
  unchecked?: boolean;
}

/** A template as the provider layer read it from Meta's catalogue. */
export interface CatalogueTemplate {
  metaId: string | null;
  name: string;
  language: string;
  status: string;
  category: string;
  components: unknown[];
  spec: TemplateSpec;
}

export const TEMPLATE_CATEGORIES = ['marketing', 'utility', 'authentication'] as const;
export type TemplateCategory = (typeof TEMPLATE_CATEGORIES)[number];

/** Meta writes the language en_US in its catalogue and sometimes en-US in webhooks. */
export const normalizeLanguage = (l: string) => l.trim().replace('-', '_');

/** Replace a gateway's catalogue with what Meta listed (every page), in one transaction. */
export async function storeCatalogue(ctx: CoreCtx, gatewayId: string, list: CatalogueTemplate[]): Promise<number> {
  return ctx.store.transaction(async (tx) => {
    const now = ctx.now();
    const keep = new Set<string>();
    for (const t of list) {
      const language = normalizeLanguage(t.language);
      keep.add(`${t.name}\0${language}`);
      await tx.run(
        sql`INSERT INTO whatsapp_templates (id, gateway_id, meta_id, name, language, status, category, parameter_format, components, spec, state_at, synced_at, updated_at)
            VALUES (${newId('tpl')}, ${gatewayId}, ${t.metaId}, ${t.name}, ${language}, ${t.status.toUpperCase()},
              ${t.category.toLowerCase()}, ${t.spec.format}, ${JSON.stringify(t.components)}, ${JSON.stringify(t.spec)},
              ${now}, ${now}, ${now})
            ON CONFLICT (gateway_id, name, language) DO UPDATE SET meta_id = excluded.meta_id, status = excluded.status,
              category = excluded.category, parameter_format = excluded.parameter_format, components = excluded.components,
              spec = excluded.spec, state_at = excluded.state_at, synced_at = excluded.synced_at, updated_at = excluded.updated_at`,
      );
    }
    // Deleted at Meta since the last sync: a send of it would fail there.
    const old = await tx.all<Pick<TemplateRow, 'id' | 'name' | 'language'>>(
      sql`SELECT id, name, language FROM whatsapp_templates WHERE gateway_id = ${gatewayId}`,
    );
    for (const o of old)
      if (!keep.has(`${o.name}\0${o.language}`)) await tx.run(sql`DELETE FROM whatsapp_templates WHERE id = ${o.id}`);
    await tx.run(
      sql`INSERT INTO whatsapp_template_syncs (gateway_id, synced_at, templates, attempted_at, error)
          VALUES (${gatewayId}, ${now}, ${list.length}, ${now}, NULL)
          ON CONFLICT (gateway_id) DO UPDATE SET synced_at = excluded.synced_at, templates = excluded.templates,
            attempted_at = excluded.attempted_at, error = NULL`,
    );
    return list.length;
  });
}

/** A sync that could not read the catalogue: the last good one stays in force. */
export async function recordSyncFailure(ctx: CoreCtx, gatewayId: string, error: string): Promise<void> {
  const now = ctx.now();
  await ctx.store.run(
    sql`INSERT INTO whatsapp_template_syncs (gateway_id, synced_at, templates, attempted_at, error)
        VALUES (${gatewayId}, NULL, 0, ${now}, ${error.slice(0, 1000)})
        ON CONFLICT (gateway_id) DO UPDATE SET attempted_at = excluded.attempted_at, error = excluded.error`,
  );
}

/** The gateway's last sync (or attempt), null when it was never synced. */
export async function templateSync(ctx: CoreCtx, gatewayId: string): Promise<TemplateSyncRow | null> {
  return (
    (await ctx.store.get<TemplateSyncRow>(
      sql`SELECT * FROM whatsapp_template_syncs WHERE gateway_id = ${gatewayId}`,
    )) ?? null
  );
}

/** Meta's template webhooks, in msgd's terms: a status, a category, or both. */
export interface TemplateChange {
  /** The gateways whose catalogue it is: of this kind, whose setting has this value (WhatsApp's waba_id). */
  account: { kind: GatewayKind; setting: string; value: string };
  metaId: string | null;
  name: string | null;
  language: string | null;
  status?: string;
  category?: string;
  /** Meta's time of the change (entry.time): an older change never undoes a newer one. */
  at: number;
}

const SPEC_UNKNOWN: TemplateSpec = { format: 'positional', header: null, body: [], buttons: [], unchecked: true };

/**
 * Apply a template webhook to the catalogues of the WhatsApp Cloud gateways of that WABA that
 * signed it. A template not in the catalogue yet (created since the last sync) is added with
 * its parameters unchecked until the next sync reads its components. Returns what happened,
 * for the webhook log; null when no such gateway signed it.
 */
export function applyTemplateChange(
  ctx: CoreCtx,
  ch: TemplateChange,
  trusted: (gatewayId: string) => boolean,
): { updated: number } | { unroutable: string } {
  const db = ctx.db.sqlite;
  const a = ch.account;
  const gws = stmt<[string, string, string], { id: string }>(
    db,
    'SELECT id FROM gateways WHERE kind = ? AND json_extract(settings, ?) = ?',
  )
    .all(a.kind, `$.${a.setting}`, a.value)
    .filter((g) => trusted(g.id));
  if (gws.length === 0) return { unroutable: `no ${a.kind} gateway with ${a.setting} ${a.value} signed this webhook` };
  const language = ch.language ? normalizeLanguage(ch.language) : null;
  const status = ch.status?.toUpperCase();
  const category = ch.category?.toLowerCase();
  let updated = 0;
  for (const g of gws) {
    const row =
      (ch.metaId
        ? stmt<[string, string], TemplateRow>(
            db,
            'SELECT * FROM whatsapp_templates WHERE gateway_id = ? AND meta_id = ?',
          ).get(g.id, ch.metaId)
        : undefined) ??
      (ch.name && language
        ? stmt<[string, string, string], TemplateRow>(
            db,
            'SELECT * FROM whatsapp_templates WHERE gateway_id = ? AND name = ? AND language = ?',
          ).get(g.id, ch.name, language)
        : undefined);
    if (!row) {
      if (!ch.name || !language || !status) continue;
      stmt(
        db,
        `INSERT INTO whatsapp_templates (id, gateway_id, meta_id, name, language, status, category, parameter_format, components, spec, state_at, synced_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'positional', '[]', ?, ?, 0, ?)`,
      ).run(
        newId('tpl'),
        g.id,
        ch.metaId,
        ch.name,
        language,
        status,
        category ?? '',
        JSON.stringify(SPEC_UNKNOWN),
        ch.at,
        ctx.now(),
      );
      updated++;
      continue;
    }
    // Meta's times are whole seconds: only a state newer by more than that wins over this change.
    if (row.state_at >= ch.at + 1000) continue;
    stmt(db, 'UPDATE whatsapp_templates SET status = ?, category = ?, state_at = ?, updated_at = ? WHERE id = ?').run(
      status ?? row.status,
      category ?? row.category,
      ch.at,
      ctx.now(),
      row.id,
    );
    updated++;
  }
  return { updated };
}

/** applyTemplateChange inside the caller's store transaction `q`, on either store. */
export async function applyTemplateChangeIn(
  q: Queryable,
  ctx: CoreCtx,
  ch: TemplateChange,
  trusted: (gatewayId: string) => boolean,
): Promise<{ updated: number } | { unroutable: string }> {
  const a = ch.account;
  const gws = (
    await q.all<{ id: string }>(
      sql`SELECT id FROM gateways WHERE kind = ${a.kind} AND ${jsonText(ctx.store.dialect, 'settings', a.setting)} = ${a.value}
          ORDER BY id`,
    )
  ).filter((g) => trusted(g.id));
  if (gws.length === 0) return { unroutable: `no ${a.kind} gateway with ${a.setting} ${a.value} signed this webhook` };
  const language = ch.language ? normalizeLanguage(ch.language) : null;
  const status = ch.status?.toUpperCase();
  const category = ch.category?.toLowerCase();
  let updated = 0;
  for (const g of gws) {
    const row =
      (ch.metaId
        ? await q.get<TemplateRow>(
            sql`SELECT * FROM whatsapp_templates WHERE gateway_id = ${g.id} AND meta_id = ${ch.metaId}`,
          )
        : undefined) ??
      (ch.name && language
        ? await q.get<TemplateRow>(
            sql`SELECT * FROM whatsapp_templates WHERE gateway_id = ${g.id} AND name = ${ch.name} AND language = ${language}`,
          )
        : undefined);
    if (!row) {
      if (!ch.name || !language || !status) continue;
      await q.run(
        sql`INSERT INTO whatsapp_templates (id, gateway_id, meta_id, name, language, status, category, parameter_format,
              components, spec, state_at, synced_at, updated_at)
            VALUES (${newId('tpl')}, ${g.id}, ${ch.metaId}, ${ch.name}, ${language}, ${status}, ${category ?? ''}, 'positional',
              '[]', ${JSON.stringify(SPEC_UNKNOWN)}, ${ch.at}, 0, ${ctx.now()})`,
      );
      updated++;
      continue;
    }
    // As applyTemplateChange: only a state newer by more than Meta's whole second wins.
    if (row.state_at >= ch.at + 1000) continue;
    await q.run(
      sql`UPDATE whatsapp_templates SET status = ${status ?? row.status}, category = ${category ?? row.category},
            state_at = ${ch.at}, updated_at = ${ctx.now()} WHERE id = ${row.id}`,
    );
    updated++;
  }
  return { updated };
}

export interface TemplateFilter {
  name?: string;
  language?: string;
  status?: string;
  category?: string;
}

/** A gateway's templates, by name and language, after the keyset `after` (a template id). */
export async function listTemplates(
  ctx: CoreCtx,
  gatewayIds: string[],
  f: TemplateFilter,
  opts: { after?: string; limit?: number } = {},
): Promise<TemplateRow[]> {
  if (gatewayIds.length === 0) return [];
  const where: Sql[] = [inList(ctx.store.dialect, 'gateway_id', gatewayIds)];
  if (f.name) where.push(sql`name = ${f.name}`);
  if (f.language) where.push(sql`language = ${normalizeLanguage(f.language)}`);
  if (f.status) where.push(sql`status = ${f.status.toUpperCase()}`);
  if (f.category) where.push(sql`category = ${f.category.toLowerCase()}`);
  if (opts.after) where.push(sql`id > ${opts.after}`);
  const limit = opts.limit ? sql` LIMIT ${Math.trunc(opts.limit)}` : sql``;
  return ctx.store.all<TemplateRow>(
    sql`SELECT * FROM whatsapp_templates WHERE ${sql.join(where, ' AND ')} ORDER BY id${limit}`,
  );
}

/** The templates of the gateway behind the partner's active WhatsApp channel. */
export async function partnerTemplates(
  ctx: CoreCtx,
  partnerId: string,
  f: TemplateFilter,
  opts: { after?: string; limit?: number } = {},
): Promise<TemplateRow[]> {
  const gws = await ctx.store.all<{ gateway_id: string }>(
    sql`SELECT gateway_id FROM channels WHERE partner_id = ${partnerId} AND type = 'whatsapp' AND status = 'active'`,
  );
  return listTemplates(
    ctx,
    gws.map((g) => g.gateway_id),
    f,
    opts,
  );
}

export function templateJson(t: TemplateRow) {
  const spec = JSON.parse(t.spec) as TemplateSpec;
  return {
    id: t.id,
    name: t.name,
    language: t.language,
    status: t.status,
    category: t.category,
    parameter_format: t.parameter_format,
    parameters: {
      header: spec.header,
      body: spec.body,
      buttons: spec.buttons.filter((b) => b.params > 0),
      checked: !spec.unchecked,
    },
    components: JSON.parse(t.components) as unknown[],
    synced_at: t.synced_at ? iso(t.synced_at) : null,
    updated_at: iso(t.updated_at),
  };
}

// ---- The check before the price -------------------------------------------------------------

interface SendTemplate {
  name: string;
  language: string;
  components?: unknown[];
}

const isObj = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);
const lower = (v: unknown) => (typeof v === 'string' ? v.toLowerCase() : '');

function invalidTemplate(t: SendTemplate, what: string, details: ErrorDetail[]): AppError {
  return new AppError(
    'template_invalid',
    `template "${t.name}" (${t.language}) ${what}: Meta would refuse it after the debit, so nothing was charged`,
    details,
  );
}

/** Buttons a send may give one parameter for, or none. */
const OPTIONAL_PARAMETER = new Set(['quick_reply', 'flow', 'catalog']);

/** Which parameters a send gave, against which the template takes. */
function parameterProblems(spec: TemplateSpec, comps: unknown[]): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  const given = comps.filter(isObj);
  const of = (type: string) => given.filter((c) => lower(c.type) === type);
  const params = (c: Record<string, any> | undefined) =>
    Array.isArray(c?.parameters) ? c!.parameters.filter(isObj) : [];
  const named = spec.format === 'named';
  const namesMatch = (field: string, want: string[], got: Record<string, any>[]) => {
    const names = got.map((p) => p.parameter_name);
    if (named) {
      if (names.some((n) => typeof n !== 'string'))
        out.push({
          field,
          message: `the template's parameters are named: give parameter_name for each of ${want.join(', ')}`,
        });
      else {
        const missing = want.filter((w) => !names.includes(w));
        const extra = (names as string[]).filter((n) => !want.includes(n));
        if (missing.length) out.push({ field, message: `missing named parameter ${missing.join(', ')}` });
        if (extra.length) out.push({ field, message: `the template has no parameter named ${extra.join(', ')}` });
      }
    } else if (names.some((n) => n !== undefined)) {
      out.push({
        field,
        message: 'the template takes positional parameters ({{1}}, {{2}}, ...): leave out parameter_name',
      });
    }
  };
  // Body.
  const body = params(of('body')[0]);
  if (body.length !== spec.body.length) {
    out.push({
      field: 'template.components.body',
      message: `the body takes ${spec.body.length} parameter${spec.body.length === 1 ? '' : 's'}${spec.body.length ? ` (${spec.body.map((n) => `{{${n}}}`).join(', ')})` : ''}, got ${body.length}`,
    });
  } else if (body.length) namesMatch('template.components.body', spec.body, body);
  // Header.
  const header = of('header')[0];
  const hp = params(header);
  if (!spec.header) {
    if (hp.length)
      out.push({ field: 'template.components.header', message: "the template's header takes no parameters" });
  } else if (spec.header.kind === 'text') {
    if (hp.length !== spec.header.params.length)
      out.push({
        field: 'template.components.header',
        message: `the text header takes ${spec.header.params.length} parameter, got ${hp.length}`,
      });
    else namesMatch('template.components.header', spec.header.params, hp);
  } else {
    const want = spec.header.type;
    if (hp.length !== 1)
      out.push({
        field: 'template.components.header',
        message: `the header takes one ${want} parameter, got ${hp.length}`,
      });
    else if (lower(hp[0].type) !== want)
      out.push({
        field: 'template.components.header',
        message: `the header is a ${want} header: give a ${want} parameter, not ${hp[0].type === undefined ? 'none' : String(hp[0].type)}`,
      });
  }
  // Buttons: one component per button that takes parameters, named by its index.
  const buttons = of('button');
  const seen = new Set<number>();
  for (const b of buttons) {
    const index = Number(b.index);
    const field = `template.components.button[${String(b.index)}]`;
    const sb = spec.buttons.find((x) => x.index === index);
    if (!Number.isInteger(index) || !sb) {
      out.push({
        field,
        message: `the template has no button at index ${String(b.index)} (it has ${spec.buttons.length})`,
      });
      continue;
    }
    seen.add(index);
    const n = params(b).length;
    // A quick reply's payload, a Flow button's action and a catalogue button's thumbnail are optional.
    const optional = sb.params === 0 && OPTIONAL_PARAMETER.has(sb.type) && n <= 1;
    if (n !== sb.params && !optional)
      out.push({
        field,
        message: `the ${sb.type} button at index ${index} takes ${sb.params} parameter${sb.params === 1 ? '' : 's'}, got ${n}`,
      });
  }
  for (const sb of spec.buttons) {
    if (sb.params > 0 && !seen.has(sb.index))
      out.push({
        field: `template.components.button[${sb.index}]`,
        message: `the ${sb.type} button at index ${sb.index} takes ${sb.params} parameter${sb.params === 1 ? '' : 's'}: give {"type": "button", "sub_type": "${sb.type}", "index": "${sb.index}", "parameters": [...]}`,
      });
  }
  return out;
}

/**
 * The catalogue's template for a send through this gateway, or a 400 template_invalid saying
 * what Meta would refuse: an unknown name or language, a status other than APPROVED, parameters
 * that do not fit the components. null: the gateway's catalogue was never synced (no check).
 */
export function checkTemplate(ctx: CoreCtx, gatewayId: string, t: SendTemplate): TemplateRow | null {
  const db = ctx.db.sqlite;
  const synced = stmt<[string], { synced_at: number | null }>(
    db,
    'SELECT synced_at FROM whatsapp_template_syncs WHERE gateway_id = ?',
  ).get(gatewayId);
  if (!synced?.synced_at) return null;
  const langs = stmt<[string, string], TemplateRow>(
    db,
    'SELECT * FROM whatsapp_templates WHERE gateway_id = ? AND name = ? ORDER BY language',
  ).all(gatewayId, t.name);
  return templateVerdict(t, langs);
}

/**
 * checkTemplate's rule over the rows it reads, for a synced catalogue: `langs` are the
 * catalogue's templates of that name, by language. Returns the template, or throws the 400.
 */
export function templateVerdict(t: SendTemplate, langs: readonly TemplateRow[]): TemplateRow {
  if (langs.length === 0)
    throw invalidTemplate(t, 'is not in the WhatsApp catalogue of this sender', [
      {
        field: 'template.name',
        message: 'no approved template by this name: see GET /v1/templates for the ones you may send',
      },
    ]);
  const row = langs.find((r) => r.language === t.language);
  if (!row)
    throw invalidTemplate(t, 'has no translation in this language', [
      { field: 'template.language', message: `the template exists in ${langs.map((r) => r.language).join(', ')}` },
    ]);
  if (row.status !== 'APPROVED')
    throw invalidTemplate(t, `is ${row.status}`, [
      { field: 'template.status', message: `${row.status}: only an APPROVED template can be sent` },
    ]);
  const spec = JSON.parse(row.spec) as TemplateSpec;
  if (spec.unchecked) return row;
  const problems = parameterProblems(spec, t.components ?? []);
  if (problems.length) throw invalidTemplate(t, 'does not take these parameters', problems);
  return row;
}
