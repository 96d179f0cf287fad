import { Agent, type Dispatcher } from 'undici';
import type { CoreCtx } from '../core/context.js';
import { getGateway } from '../core/gateways.js';
import { openGatewayIn, openGatewaysOfKindIn, type GatewayWithSecrets } from '../core/gateway-secrets.js';
import { recordSyncFailure, storeCatalogue } from '../core/whatsapp-templates.js';
import { AppError } from '../lib/errors.js';
import { fetchCatalogue } from '../providers/whatsapp-cloud/templates.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';

// The WhatsApp template catalogues: read from Meta (every page) and stored whole, on start,
// every few hours (a maintenance task, so a slot runs once across restarts) and on demand
// (msgctl gateway templates sync, the TUI). A failed read keeps the last good catalogue.

export interface TemplateSyncDeps {
  ctx: CoreCtx;
  dispatcher: Dispatcher;
  timeoutMs: number;
}

/** The cron slot of the periodic sync: every four hours, off the hour. */
export const TEMPLATE_SYNC_CRON = '11 */4 * * *';
export const TEMPLATE_SYNC_TASK = 'whatsapp-templates-sync';

export type SyncOutcome = { gateway: string; templates: number } | { gateway: string; error: string };

async function syncOne(deps: TemplateSyncDeps, gw: GatewayWithSecrets): Promise<SyncOutcome> {
  const res = await fetchCatalogue(gw, {
    dispatcher: deps.dispatcher,
    timeoutMs: deps.timeoutMs,
    publicUrl: null,
    now: deps.ctx.now,
  });
  if (!res.ok) {
    await recordSyncFailure(deps.ctx, gw.id, res.error);
    return { gateway: gw.name, error: res.error };
  }
  return { gateway: gw.name, templates: await storeCatalogue(deps.ctx, gw.id, res.templates) };
}

/** Sync one gateway by name or id; a 400 when it is no WhatsApp Cloud gateway with a waba_id. */
export async function syncGatewayTemplates(deps: TemplateSyncDeps, ref: string): Promise<SyncOutcome> {
  const view = await getGateway(deps.ctx, ref);
  if (view.kind !== 'whatsapp_cloud')
    throw new AppError(
      'invalid_request',
      `${view.name} is a ${view.kind} gateway: only WhatsApp Cloud gateways have templates`,
    );
  const gw = await openGatewayIn(deps.ctx, view.id);
  if (!gw.settings.waba_id)
    throw new AppError(
      'invalid_request',
      `${gw.name} has no waba_id setting: set it to the WhatsApp Business Account id to read its templates`,
      [{ field: 'waba_id', message: 'the numeric WhatsApp Business Account id' }],
    );
  return syncOne(deps, gw);
}

/** Every active WhatsApp Cloud gateway that names its WABA. */
export async function syncAllTemplates(deps: TemplateSyncDeps): Promise<SyncOutcome[]> {
  const out: SyncOutcome[] = [];
  for (const gw of await openGatewaysOfKindIn(deps.ctx, ['whatsapp_cloud'])) {
    if (gw.status !== 'active' || !gw.settings.waba_id) continue;
    out.push(await syncOne(deps, gw));
  }
  return out;
}

export function templateSyncTask(deps: Omit<TemplateSyncDeps, 'ctx'>): MaintenanceTask<{ ctx: CoreCtx }> {
  return {
    name: TEMPLATE_SYNC_TASK,
    cron: TEMPLATE_SYNC_CRON,
    run: async (rt) => ({ gateways: await syncAllTemplates({ ...deps, ctx: rt.ctx }) }),
  };
}

/**
 * One sync from a process that has no HTTP client of its own (msgctl, the TUI): a connection
 * pool for this call only, closed after it.
 */
export async function syncGatewayTemplatesOnce(ctx: CoreCtx, timeoutMs: number, ref: string): Promise<SyncOutcome> {
  const dispatcher = new Agent({ connectTimeout: Math.min(timeoutMs, 10_000) });
  try {
    return await syncGatewayTemplates({ ctx, dispatcher, timeoutMs }, ref);
  } finally {
    await dispatcher.close();
  }
}
