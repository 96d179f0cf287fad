import { existsSync, realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { listChannels } from '../core/channels.js';
import type { CoreCtx, GatewayKind } from '../core/context.js';
import { GRAPH_API_VERSION, META_KINDS } from '../providers/meta-app/settings.js';
import { getGateway, listGatewaySummaries, type GatewayView } from '../core/gateways.js';
import { verifyLedger } from '../core/ledger.js';
import { listPartners } from '../core/partners.js';
import { listPrices } from '../core/prices.js';
import { countHeldMessages } from '../jobs/restore-hold.js';
import { DB_FILE, openDataDir, type DataDir } from '../db/datadir.js';
import { keyFileMode, modeText } from '../db/master-key.js';
import { SEALED_ROWS, verifySealedSecrets, type SealedKind } from '../core/sealed-secrets.js';
import { migrate, migrationStatus } from '../db/migrate.js';
import { checkIntegrity } from '../db/open.js';
import { configFileFor } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { readHeartbeat, readServerConfigFile, serverState } from '../core/counter-store.js';
import { configFor, coreCtxOf, withGlobals, type Globals } from './context.js';
import { describeError } from './errors.js';
import { SecretDecryptError } from '../core/secrets.js';
import { examples } from './help.js';
import { refuseOnPostgres } from '../db/open-store.js';
import { count, money, table, type Result } from './output.js';
import { templateSync } from '../core/whatsapp-templates.js';

type Status = 'ok' | 'warn' | 'fail';
export interface Check {
  name: string;
  status: Status;
  message: string;
}

const WEBHOOK_SECRET: Partial<Record<GatewayKind, string>> = {
  whatsapp_cloud: 'app_secret',
  meta_messenger: 'app_secret',
  meta_instagram: 'app_secret',
  sendgrid: 'webhook_public_key',
};

function keyCheck(dd: DataDir): Check {
  const src = dd.keySource;
  if (src.kind === 'env') return { name: 'master key', status: 'ok', message: 'from MSGD_MASTER_KEY' };
  const mode = keyFileMode(src.path);
  const shown = mode === null ? '?' : modeText(mode);
  // Any group or other bit lets another account read every provider secret. (A masterKeyFile
  // with one is refused before this: the data directory does not open.)
  if (mode === null || (mode & 0o077) !== 0) {
    return {
      name: 'master key',
      status: 'fail',
      message: `${src.path} has mode ${shown}; it must be 0600 (chmod 600 ${src.path})`,
    };
  }
  const from = src.kind === 'file' ? 'masterKeyFile, ' : '';
  return { name: 'master key', status: 'ok', message: `${src.path} (${from}mode ${shown})` };
}

const SEALED_CHECK: Record<SealedKind, { name: string; what: string }> = {
  gateway: { name: 'gateway secrets', what: 'secrets' },
  webhook: { name: 'webhook secrets', what: 'signing secrets' },
  totp: { name: 'TOTP secrets', what: 'TOTP secrets' },
};

/** One check per kind of sealed secret: how many rows were opened, or which did not open. */
function sealedChecks(ctx: CoreCtx): Check[] {
  return verifySealedSecrets(ctx).map(({ kind, rows, failed }) => {
    const { name, what } = SEALED_CHECK[kind];
    const [one, many] = SEALED_ROWS[kind];
    if (!failed.length)
      return { name, status: 'ok', message: `${count(rows, one, many)}, ${what} readable with this master key` };
    const shown = failed.slice(0, 20).join(', ') + (failed.length > 20 ? ` and ${failed.length - 20} more` : '');
    const all = failed.length === rows;
    return {
      name,
      status: 'fail',
      message: `the ${what} of ${all ? count(rows, one, many) : `${failed.length} of ${rows} ${many}`} do not open with this master key (${shown}): ${all ? 'it is probably not the key they were written with' : 'they were probably written with another key'}`,
    };
  });
}

async function schemaChecks(ctx: CoreCtx): Promise<Check[]> {
  const checks: Check[] = [];
  const ledger = await verifyLedger(ctx);
  checks.push(
    ledger.ok
      ? {
          name: 'ledger',
          status: 'ok',
          message: `${count(ledger.partners, 'partner')}: every balance equals the sum of its entries`,
        }
      : {
          name: 'ledger',
          status: 'fail',
          message: ledger.mismatches
            .map(
              (m) =>
                `${m.slug}: balance ${money(m.balance)} but entries sum to ${money(m.sum_of_entries)}${m.last_balance_after !== null && m.last_balance_after !== m.balance ? ` (last entry says ${money(m.last_balance_after)})` : ''}`,
            )
            .join('; '),
        },
  );

  checks.push(...sealedChecks(ctx));
  // The other checks read the gateways whose secrets open; the others failed just above.
  const gateways: GatewayView[] = [];
  for (const { id } of await listGatewaySummaries(ctx)) {
    try {
      gateways.push(await getGateway(ctx, id));
    } catch (e) {
      if (!(e instanceof SecretDecryptError)) throw e;
    }
  }

  // The secret each kind's webhooks are verified with: without it they are all refused (401).
  const unverifiable = gateways.filter(
    (g) => WEBHOOK_SECRET[g.kind] && !g.secret_names.includes(WEBHOOK_SECRET[g.kind]!),
  );
  checks.push(
    unverifiable.length
      ? {
          name: 'webhook verification',
          status: 'warn',
          message: `${unverifiable.map((g) => `no ${WEBHOOK_SECRET[g.kind]} on ${g.name}`).join('; ')}: their webhooks cannot be verified and are refused (msgctl gateway update <gateway> --secret-env <secret>=<ENV_VAR>)`,
        }
      : {
          name: 'webhook verification',
          status: 'ok',
          message: 'every Meta and SendGrid gateway has the secret its webhooks are verified with',
        },
  );
  // Providers reach msgd at server.publicUrl: Twilio is given it as StatusCallback, and the
  // webhook URLs msgctl gateway show prints are built on it.
  const external = gateways.filter((g) => g.kind !== 'sandbox' && g.status === 'active');
  if (external.length && !ctx.config.server.publicUrl) {
    checks.push({
      name: 'public URL',
      status: 'warn',
      message: `server.publicUrl is not set but ${external.map((g) => g.name).join(', ')} ${external.length === 1 ? 'needs' : 'need'} it: Twilio gets no StatusCallback and webhook URLs point at this machine's address (set server.publicUrl or MSGD_PUBLIC_URL)`,
    });
  }

  // Meta retires a Graph API version about two years after its release; a gateway keeps the
  // version it was created with, so one made by an older msgd may be calling a retired one.
  const major = (v: unknown) => (typeof v === 'string' ? Number(/^v(\d+)\./.exec(v)?.[1] ?? NaN) : NaN);
  const stale = gateways.filter(
    (g) => META_KINDS.includes(g.kind) && major(g.settings.api_version) < major(GRAPH_API_VERSION),
  );
  if (stale.length) {
    checks.push({
      name: 'graph version',
      status: 'warn',
      message: `${stale.map((g) => `${g.name} calls Graph ${g.settings.api_version}`).join(', ')}, older than msgd's ${GRAPH_API_VERSION}; Meta retires a version about two years after its release (msgctl gateway update <gateway> --set api_version=${GRAPH_API_VERSION})`,
    });
  }

  // Implicit TLS (secure) on the STARTTLS port: an SMTP gateway made by an earlier msgd
  // stored port 587 even when none was given, so setting secure later kept it.
  const tlsOn587 = gateways.filter(
    (g) =>
      g.kind === 'smtp' &&
      (g.settings.secure === true || g.settings.secure === 'true') &&
      Number(g.settings.port) === 587,
  );
  if (tlsOn587.length) {
    checks.push({
      name: 'smtp port',
      status: 'warn',
      message: `${tlsOn587.map((g) => g.name).join(', ')}: secure (TLS from the first byte) on port 587, where relays expect STARTTLS; sends will time out (msgctl gateway update <gateway> --unset port, for 465)`,
    });
  }

  // A WhatsApp sender whose template catalogue was never read: its template sends are not
  // checked before the debit, and Meta refuses a wrong one only after it.
  const unsynced: { g: (typeof gateways)[number]; sync: Awaited<ReturnType<typeof templateSync>> }[] = [];
  for (const g of gateways) {
    if (g.kind !== 'whatsapp_cloud' || g.status !== 'active') continue;
    const sync = await templateSync(ctx, g.id);
    if (!sync?.synced_at) unsynced.push({ g, sync });
  }
  if (unsynced.length) {
    checks.push({
      name: 'whatsapp templates',
      status: 'warn',
      message: `${unsynced
        .map(({ g, sync }) =>
          !g.settings.waba_id
            ? `${g.name} has no waba_id`
            : `${g.name}'s catalogue was never read${sync?.error ? ` (${sync.error})` : ''}`,
        )
        .join(
          '; ',
        )}: template sends through it are not checked before the debit (msgctl gateway update <gateway> --set waba_id=<id>, then msgctl gateway templates sync <gateway>)`,
    });
  }

  const channels = await listChannels(ctx);
  const slugs = new Map(listPartners(ctx).map((p) => [p.id, p.slug]));
  // A price for the channel's gateway (with or without the partner) covers it too; a price per
  // template category covers only templates.
  const priced = new Set(
    (await listPrices(ctx))
      .filter((p) => p.category === '')
      .map((p) => `${p.channel_type}/${p.partner_id}/${p.gateway_id}`),
  );
  const free = channels.filter(
    (c) =>
      ![`${c.partner_id}/`, '/', `${c.partner_id}/${c.gateway_id}`, `/${c.gateway_id}`].some((k) =>
        priced.has(`${c.type}/${k}`),
      ),
  );
  checks.push(
    free.length
      ? {
          name: 'prices',
          status: 'warn',
          message: `no price for ${free.map((c) => `${slugs.get(c.partner_id)} ${c.type}`).join(', ')}: these sends are free (msgctl price set <channel> <amount>)`,
        }
      : { name: 'prices', status: 'ok', message: `${count(channels.length, 'active channel')}, all priced` },
  );

  // Content also lives in outbound events and the raw provider webhook log, each deleted on
  // its own schedule: kept longer, they would hold what retention redacted from messages.
  const contentDays = ctx.config.retention.messageContentDays;
  if (contentDays !== null) {
    const longer = [
      ['webhooksOut.retentionDays', ctx.config.webhooksOut.retentionDays],
      ['webhooksIn.retentionDays', ctx.config.webhooksIn.retentionDays],
    ].filter(([, days]) => Number(days) > contentDays);
    if (longer.length) {
      checks.push({
        name: 'retention',
        status: 'warn',
        message: `retention.messageContentDays is ${contentDays} but ${longer.map(([k, d]) => `${k} is ${d}`).join(', ')}: message content stays there that long (set them to ${contentDays} or less)`,
      });
    }
  }

  const held = await countHeldMessages(ctx);
  if (held > 0) {
    checks.push({
      name: 'held messages',
      status: 'warn',
      message: `${count(held, 'message is', 'messages are')} held since a restore (the old server may have sent them): check with the providers, then msgctl messages release-held`,
    });
  }

  const orphaned = channels.filter((c) => c.gateway_status === 'disabled');
  checks.push(
    orphaned.length
      ? {
          name: 'channels',
          status: 'warn',
          message: `${orphaned.length === 1 ? 'an active channel on a disabled gateway' : 'active channels on disabled gateways'}: ${orphaned.map((c) => `${slugs.get(c.partner_id)} ${c.type} via ${c.gateway_name}`).join(', ')}; ${orphaned.length === 1 ? 'its' : 'their'} sends will fail`,
        }
      : { name: 'channels', status: 'ok', message: 'no active channel uses a disabled gateway' },
  );
  return checks;
}

const NO_CONFIG_FILE = 'none: defaults and MSGD_* variables';

function sameFile(a: string | null, b: string | null): boolean {
  if (a === null || b === null) return a === b;
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return p;
    }
  };
  return real(a) === real(b);
}

/**
 * msgctl builds links (user invites, webhook URLs) and reaches msgd (sandbox inbound) from its
 * own configuration: one that is not msgd's gives another publicUrl or port.
 */
function serverConfigCheck(ctx: CoreCtx, mine: string | null): Check | null {
  const theirs = readServerConfigFile(ctx);
  if (!theirs) return null;
  const state = serverState(readHeartbeat(ctx), ctx.now()).state;
  const who =
    state === 'stopped' ? 'the msgd that last ran on this data directory' : 'the msgd running on this data directory';
  if (sameFile(theirs.path, mine)) {
    return { name: 'msgd configuration', status: 'ok', message: `${who} read the same (${mine ?? NO_CONFIG_FILE})` };
  }
  const fix = theirs.path
    ? `pass --config ${theirs.path} or set MSGD_CONFIG=${theirs.path}`
    : 'run msgctl without --config and MSGD_CONFIG';
  return {
    name: 'msgd configuration',
    status: 'warn',
    message: `${who} read ${theirs.path ?? NO_CONFIG_FILE}, msgctl read ${mine ?? NO_CONFIG_FILE}: the links msgctl prints (gateway show, user invite) and the address sandbox inbound calls may use another publicUrl or port than msgd's (${fix})`,
  };
}

/**
 * Every check of a data directory, in order. `integrity: 'full'` runs PRAGMA integrity_check
 * (msgctl restore) rather than the faster quick_check.
 */
export async function inspect(
  dir: string,
  config: Config,
  opts: {
    integrity?: 'quick' | 'full';
    env?: NodeJS.ProcessEnv;
    /** msgctl's own config file (null: none), compared with the one msgd records at start. */
    configFile?: string | null;
  } = {},
): Promise<Check[]> {
  const checks: Check[] = [];
  if (!existsSync(dir))
    return [{ name: 'data directory', status: 'fail', message: `${dir} does not exist (msgctl init)` }];
  checks.push({ name: 'data directory', status: 'ok', message: dir });
  if (!existsSync(join(dir, DB_FILE)))
    return [...checks, { name: 'database', status: 'fail', message: `${join(dir, DB_FILE)} is missing (msgctl init)` }];
  let dd: DataDir;
  try {
    dd = openDataDir(dir, { create: false, migrate: false, env: opts.env, masterKeyFile: config.masterKeyFile });
  } catch (e) {
    return [...checks, { name: 'master key', status: 'fail', message: describeError(e) }];
  }
  try {
    checks.push(keyCheck(dd));
    const integrity = checkIntegrity(dd.db, opts.integrity === 'full');
    checks.push({
      name: 'database',
      status: integrity === 'ok' ? 'ok' : 'fail',
      message: `${dd.db.path}: ${integrity === 'ok' ? 'integrity ok' : integrity}`,
    });
    const status = migrationStatus(dd.db);
    if (status.tooNew) {
      let message = 'the database was migrated by a newer msgd';
      try {
        migrate(dd.db); // throws before changing anything: we want its message
      } catch (e) {
        message = describeError(e);
      }
      return [...checks, { name: 'migrations', status: 'fail', message }];
    }
    checks.push(
      status.pending.length
        ? {
            name: 'migrations',
            status: status.applied ? 'warn' : 'fail',
            message: `${status.pending.length} pending: ${status.pending.join(', ')} (msgctl migrate, or msgd applies them at start)`,
          }
        : { name: 'migrations', status: 'ok', message: `${status.applied} applied, none pending` },
    );
    if (status.applied === 0) return checks;
    const ctx = coreCtxOf(dd, config);
    try {
      checks.push(...(await schemaChecks(ctx)));
      const server = opts.configFile === undefined ? null : serverConfigCheck(ctx, opts.configFile);
      if (server) checks.push(server);
    } catch (e) {
      checks.push({ name: 'schema checks', status: 'fail', message: describeError(e) });
    }
    return checks;
  } finally {
    dd.close();
  }
}

export function checkTable(checks: Check[]): string {
  return table(
    ['status', 'check', 'details'],
    checks.map((c) => [c.status, c.name, c.message]),
  );
}

async function doctor(globals: Globals): Promise<Result> {
  const config = configFor(globals);
  refuseOnPostgres(
    config,
    "msgctl doctor checks a data directory's SQLite database only",
    "check the schema with msgctl migrate and the database with PostgreSQL's own tools (pg_amcheck); nothing was checked",
  );
  const dir = resolve(config.dataDir);
  const configFile = configFileFor({ configPath: globals.config, env: globals.io?.env });
  const checks: Check[] = [
    { name: 'configuration', status: 'ok', message: configFile ?? NO_CONFIG_FILE },
    ...(await inspect(dir, config, { env: globals.io?.env, configFile })),
  ];
  const failures = checks.filter((c) => c.status === 'fail').length;
  const warnings = checks.filter((c) => c.status === 'warn').length;
  const summary = `${failures} failed, ${count(warnings, 'warning')}, ${checks.length - failures - warnings} ok`;
  return {
    json: { ok: failures === 0, data_dir: dir, config_file: configFile, failures, warnings, checks },
    text: `${checkTable(checks)}

${summary}`,
    failure: failures ? `doctor: ${count(failures, 'check')} failed` : undefined,
  };
}

export function registerDoctor(program: Command) {
  program
    .command('doctor')
    .description(
      'check the data directory, schema, ledger, master key (does it open every stored secret?) and configuration; exit 1 if a check fails',
    )
    .addHelpText('after', examples('msgctl doctor', 'msgctl doctor --json | jq .checks'))
    .action(withGlobals(doctor));
}
