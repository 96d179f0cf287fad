import type { Row } from '../db/rows.js';
import type { gateways } from '../db/schema.js';
import type { Queryable, Tx } from '../db/query.js';
import { sql } from '../db/sql.js';
import { AppError, invalid, notFound, type ErrorDetail } from '../lib/errors.js';
import { newId } from '../lib/ids.js';
import { iso } from '../lib/time.js';
import type { CoreCtx, GatewayKind } from './context.js';
import { auditIn } from './audit.js';
import { sealJson, unsealJson } from './secrets.js';

export type GatewayRow = Row<typeof gateways>;

/** A gateway as every layer but the provider layer sees it: secrets only by name. */
export interface GatewayView {
  id: string;
  kind: GatewayKind;
  name: string;
  status: 'active' | 'disabled';
  settings: Record<string, unknown>;
  secret_names: string[];
  created_at: string;
  updated_at: string;
}

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$/;

function validateSettings(ctx: CoreCtx, kind: GatewayKind, settings: Record<string, unknown>) {
  const spec = ctx.gatewayKinds.get(kind);
  const parsed = spec.settings.safeParse(settings);
  if (!parsed.success) {
    const details: ErrorDetail[] = parsed.error.issues.map((i) => {
      if (i.code === 'unrecognized_keys') {
        return {
          field: i.keys.join(','),
          message: `unknown setting for ${kind}; allowed: ${Object.keys(spec.settings.shape).join(', ')}`,
        };
      }
      return { field: i.path.join('.'), message: i.message };
    });
    throw invalid(`invalid settings for a ${kind} gateway`, details);
  }
  return parsed.data as Record<string, unknown>;
}

function validateSecrets(ctx: CoreCtx, kind: GatewayKind, secrets: Record<string, string>, partial: boolean) {
  const spec = ctx.gatewayKinds.get(kind);
  const allowed = [...spec.secrets.required, ...spec.secrets.optional];
  const details: ErrorDetail[] = [];
  for (const [k, v] of Object.entries(secrets)) {
    if (!allowed.includes(k))
      details.push({ field: k, message: `unknown secret for ${kind}; allowed: ${allowed.join(', ') || 'none'}` });
    else if (typeof v !== 'string' || v.length === 0) details.push({ field: k, message: 'must not be empty' });
  }
  if (!partial) {
    for (const k of spec.secrets.required) {
      if (!(k in secrets)) details.push({ field: k, message: `required secret for ${kind} is missing` });
    }
  }
  if (details.length) throw invalid(`invalid secrets for a ${kind} gateway`, details);
}

/**
 * Settings and secrets that work only together (GatewayKindSpec.pairs): a gateway that would
 * fail every send, or hold a secret it never uses, is refused instead. On an update, only the
 * pairs it touches: a gateway stored before a rule existed can still be disabled or rotated.
 */
function checkPairs(
  ctx: CoreCtx,
  kind: GatewayKind,
  settings: Record<string, unknown>,
  secrets: Record<string, string>,
  touched?: Set<string>,
) {
  const details: ErrorDetail[] = [];
  for (const { setting, secret, needs } of ctx.gatewayKinds.get(kind).pairs ?? []) {
    if (touched && !touched.has(setting) && !touched.has(secret)) continue;
    const hasSetting = settings[setting] !== undefined && settings[setting] !== '';
    if (needs === 'secret' && hasSetting && !secrets[secret])
      details.push({ field: secret, message: `required with the settings given (${kind})` });
    if (needs === 'setting' && secrets[secret] && !hasSetting) {
      details.push({
        field: setting,
        message: `required with the ${secret} secret, which is never sent without it (${kind})`,
      });
    }
  }
  if (details.length) throw invalid(`invalid secrets for a ${kind} gateway`, details);
}

/** The form of newly given secrets (stored ones were checked when given: an update of something else never fails on them). */
function checkNewSecrets(ctx: CoreCtx, kind: GatewayKind, given: Record<string, string> | undefined) {
  const checks = ctx.gatewayKinds.get(kind).secretChecks ?? {};
  const details: ErrorDetail[] = [];
  for (const [k, v] of Object.entries(given ?? {})) {
    const problem = checks[k] && typeof v === 'string' && v !== '' ? checks[k](v) : null;
    if (problem) details.push({ field: k, message: problem });
  }
  if (details.length) throw invalid(`invalid secrets for a ${kind} gateway`, details);
}

export function gatewayView(row: GatewayRow): GatewayView {
  return {
    id: row.id,
    kind: row.kind,
    name: row.name,
    status: row.status,
    settings: JSON.parse(row.settings),
    // Names only: the values are sealed and never leave the provider layer.
    secret_names: [],
    created_at: iso(row.created_at)!,
    updated_at: iso(row.updated_at)!,
  };
}

function viewWithSecretNames(ctx: CoreCtx, row: GatewayRow): GatewayView {
  const v = gatewayView(row);
  v.secret_names = Object.keys(unsealJson(ctx.masterKey, row.secrets)).sort();
  return v;
}

export function addGateway(
  ctx: CoreCtx,
  input: Parameters<typeof addGatewayIn>[2],
  actor: string,
): Promise<GatewayView> {
  return ctx.store.transaction((tx) => addGatewayIn(ctx, tx, input, actor));
}

/** addGateway, inside the caller's store transaction. */
export async function addGatewayIn(
  ctx: CoreCtx,
  tx: Tx,
  input: { kind: string; name: string; settings?: Record<string, unknown>; secrets?: Record<string, string> },
  actor: string,
): Promise<GatewayView> {
  if (!ctx.gatewayKinds.has(input.kind)) {
    throw invalid(`unknown gateway kind "${input.kind}"`, [
      { field: 'kind', message: `one of ${ctx.gatewayKinds.specs.map((k) => k.kind).join(', ')}` },
    ]);
  }
  const kind = input.kind;
  if (!NAME.test(input.name ?? '')) {
    throw invalid('invalid gateway name', [
      { field: 'name', message: 'letters, digits, dot, dash, underscore; 1-63 characters' },
    ]);
  }
  const spec = ctx.gatewayKinds.get(kind);
  const settings = validateSettings(ctx, kind, input.settings ?? {});
  const secrets = { ...(input.secrets ?? {}) };
  validateSecrets(ctx, kind, secrets, false);
  checkNewSecrets(ctx, kind, input.secrets);
  checkPairs(ctx, kind, settings, secrets);
  for (const [name, make] of Object.entries(spec.generatedSecrets ?? {})) if (!secrets[name]) secrets[name] = make();
  const sealed = sealJson(ctx.masterKey, secrets);
  if (await tx.get(sql`SELECT id FROM gateways WHERE name = ${input.name}`)) {
    throw new AppError('conflict', `a gateway named "${input.name}" already exists`);
  }
  const now = ctx.now();
  const row: GatewayRow = {
    id: newId('gw'),
    kind,
    name: input.name,
    settings: JSON.stringify(settings),
    secrets: sealed,
    status: 'active',
    created_at: now,
    updated_at: now,
  };
  await tx.run(
    sql`INSERT INTO gateways (id, kind, name, settings, secrets, status, created_at, updated_at)
        VALUES (${row.id}, ${row.kind}, ${row.name}, ${row.settings}, ${row.secrets}, ${row.status}, ${row.created_at}, ${row.updated_at})`,
  );
  await auditIn(ctx, tx, actor, 'gateway.add', 'gateway', row.id, {
    kind,
    name: row.name,
    settings,
    secret_names: Object.keys(secrets),
  });
  return viewWithSecretNames(ctx, row);
}

/** Change settings (merged) and/or secrets (merged; pass "" nowhere: remove with unsetSecrets). */
export async function updateGateway(
  ctx: CoreCtx,
  ref: string,
  input: {
    settings?: Record<string, unknown>;
    /** Settings to remove (back to their default, if they have one). */
    unsetSettings?: string[];
    secrets?: Record<string, string>;
    unsetSecrets?: string[];
    status?: 'active' | 'disabled';
  },
  actor: string,
): Promise<GatewayView> {
  return ctx.store.transaction(async (tx) => {
    const row = await getGatewayRow(ctx, ref, tx);
    // Settings are checked when they change. A rule added since a gateway was stored (a
    // Messenger MESSAGE_TAG needs its tag) must not stop the operator disabling it or rotating
    // its secrets; the next change of its settings says what to fix.
    const stored = JSON.parse(row.settings) as Record<string, unknown>;
    const unset = input.unsetSettings ?? [];
    const missing = unset.filter((k) => !Object.hasOwn(stored, k));
    const both = unset.filter((k) => input.settings && Object.hasOwn(input.settings, k));
    if (both.length)
      throw invalid(
        `both set and unset: ${both.join(', ')}`,
        both.map((k) => ({ field: k, message: 'set or unset it, not both' })),
      );
    if (missing.length) {
      throw invalid(
        `gateway ${row.name} has no setting ${missing.join(', ')}`,
        missing.map((k) => ({ field: k, message: 'not set on this gateway' })),
      );
    }
    const kept = Object.fromEntries(Object.entries(stored).filter(([k]) => !unset.includes(k)));
    const settings =
      input.settings || unset.length ? validateSettings(ctx, row.kind, { ...kept, ...input.settings }) : stored;
    const secrets = { ...unsealJson(ctx.masterKey, row.secrets), ...(input.secrets ?? {}) };
    for (const k of input.unsetSecrets ?? []) delete secrets[k];
    validateSecrets(ctx, row.kind, secrets, false);
    checkNewSecrets(ctx, row.kind, input.secrets);
    const touched = new Set([
      ...Object.keys(input.settings ?? {}),
      ...unset,
      ...Object.keys(input.secrets ?? {}),
      ...(input.unsetSecrets ?? []),
    ]);
    checkPairs(ctx, row.kind, settings, secrets, touched);
    await tx.run(
      sql`UPDATE gateways SET settings = ${JSON.stringify(settings)}, secrets = ${sealJson(ctx.masterKey, secrets)},
            status = ${input.status ?? row.status}, updated_at = ${ctx.now()} WHERE id = ${row.id}`,
    );
    await auditIn(ctx, tx, actor, 'gateway.update', 'gateway', row.id, {
      settings: input.settings ? Object.keys(input.settings) : [],
      ...(unset.length ? { unset } : {}),
      secrets_changed: [...Object.keys(input.secrets ?? {}), ...(input.unsetSecrets ?? [])],
      status: input.status,
    });
    return viewWithSecretNames(ctx, await getGatewayRow(ctx, row.id, tx));
  });
}

/** The gateway with this id or name; `q` is the caller's transaction, if it runs in one. */
export function findGatewayRow(ctx: CoreCtx, ref: string, q: Queryable = ctx.store): Promise<GatewayRow | undefined> {
  return q.get<GatewayRow>(sql`SELECT * FROM gateways WHERE id = ${ref} OR name = ${ref}`);
}

export async function getGatewayRow(ctx: CoreCtx, ref: string, q: Queryable = ctx.store): Promise<GatewayRow> {
  const g = await findGatewayRow(ctx, ref, q);
  if (!g) throw notFound('gateway', ref);
  return g;
}

export async function getGateway(ctx: CoreCtx, ref: string): Promise<GatewayView> {
  return viewWithSecretNames(ctx, await getGatewayRow(ctx, ref));
}

export async function listGateways(ctx: CoreCtx): Promise<GatewayView[]> {
  const rows = await ctx.store.all<GatewayRow>(sql`SELECT * FROM gateways ORDER BY name, id`);
  return rows.map((r) => viewWithSecretNames(ctx, r));
}

export type GatewaySummary = Pick<GatewayRow, 'id' | 'name' | 'kind' | 'status'>;

/** Every gateway by name, without opening its secrets (a wrong master key cannot fail it). */
export function listGatewaySummaries(ctx: CoreCtx): Promise<GatewaySummary[]> {
  return ctx.store.all<GatewaySummary>(sql`SELECT id, name, kind, status FROM gateways ORDER BY name, id`);
}

/** Gateway names by id, without opening their secrets. */
export async function gatewayNames(ctx: CoreCtx): Promise<Map<string, string>> {
  return new Map((await listGatewaySummaries(ctx)).map((g) => [g.id, g.name]));
}

/** Throws the conflict that refuses removing a gateway an active channel still uses. */
export async function assertGatewayRemovable(ctx: CoreCtx, ref: string, q: Queryable = ctx.store): Promise<GatewayRow> {
  const row = await getGatewayRow(ctx, ref, q);
  const active = await q.all<{ id: string }>(
    sql`SELECT id FROM channels WHERE gateway_id = ${row.id} AND status = 'active'`,
  );
  if (active.length) {
    throw new AppError(
      'conflict',
      `gateway "${row.name}" is assigned to ${active.length} active channel(s); unassign them first`,
    );
  }
  return row;
}

export async function removeGateway(ctx: CoreCtx, ref: string, actor: string): Promise<GatewayView> {
  return ctx.store.transaction(async (tx) => {
    const row = await assertGatewayRemovable(ctx, ref, tx);
    await tx.run(sql`DELETE FROM channels WHERE gateway_id = ${row.id}`);
    await tx.run(sql`DELETE FROM gateways WHERE id = ${row.id}`);
    await auditIn(ctx, tx, actor, 'gateway.remove', 'gateway', row.id, { name: row.name, kind: row.kind });
    return gatewayView(row);
  });
}
