import { existsSync, realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { listChannels } from '../core/channels.js';
import type { CoreCtx, GatewayKind } from '../core/context.js';
import { GRAPH_API_VERSION, META_KINDS } from '../providers/meta-app/settings.js';
import { getGateway, listGatewaySummaries, type GatewayView } from '../core/gateways.js';
import { verifyLedger } from '../core/ledger.js';
import { listPrices } from '../core/prices.js';
import { countHeldMessages } from '../jobs/restore-hold.js';
import { DB_FILE, openDataDir, type DataDir } from '../db/datadir.js';
import { keyFileMode, loadMasterKeyWithoutDataDir, modeText, type KeySource } from '../db/master-key.js';
import { SEALED_ROWS, type SealedKind, verifySealedSecrets } from '../core/sealed-secrets.js';
import { migrate, type MigrationStatus, migrationStatus } from '../db/migrate.js';
import { checkIntegrity } from '../db/open.js';
import { migrate as migratePg, migrationStatusIn } from '../db/pg/migrate.js';
import { redactUrl } from '../lib/redact-url.js';
import { connectPg, type PgStore } from '../db/pg/store.js';
import { sql, type Dialect } from '../db/sql.js';
import { configFileFor } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { readHeartbeat, readServerConfigFile, serverState } from '../core/counter-store.js';
import { configFor, coreCtxOf, withGlobals, type Globals } from './context.js';
import { describeError } from './errors.js';
import { SecretDecryptError } from '../core/secrets.js';
import { examples } from './help.js';
import { sqliteOnlyDb, storeKindOf } from '../db/open-store.js';
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

/** Where the master key came from; a key file must be readable by msgd's user alone. */
function keyCheck(src: KeySource): Check {
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
async function sealedChecks(ctx: CoreCtx): Promise<Check[]> {
  const checks: Check[] = [];
  for (const { kind, rows, failed } of await verifySealedSecrets(ctx)) {
    const { name, what } = SEALED_CHECK[kind];
    const [one, many] = SEALED_ROWS[kind];
    if (!failed.length) {
      checks.push({ name, status: 'ok', message: `${count(rows, one, many)}, ${what} readable with this master key` });
      continue;
    }
    const shown = failed.slice(0, 20).join(', ') + (failed.length > 20 ? ` and ${failed.length - 20} more` : '');
    const every = failed.length === rows;
    checks.push({
      name,
      status: 'fail',
      message: `the ${what} of ${every ? count(rows, one, many) : `${failed.length} of ${rows} ${many}`} do not open with this master key (${shown}): ${every ? 'it is probably not the key they were written with' : 'they were probably written with another key'}`,
    });
  }
  return checks;
}

/** The checks of msgd's data, the same on both stores: every read goes through ctx.store. */
async function dataChecks(ctx: CoreCtx): Promise<Check[]> {
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

  checks.push(...(await sealedChecks(ctx)));
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
  const slugs = new Map(
    (await ctx.store.all<{ id: string; slug: string }>(sql`SELECT id, slug FROM partners`)).map((p) => [p.id, p.slug]),
  );
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
async function serverConfigCheck(ctx: CoreCtx, mine: string | null, place: string): Promise<Check | null> {
  const theirs = await readServerConfigFile(ctx);
  if (!theirs) return null;
  const state = serverState(await readHeartbeat(ctx), ctx.now()).state;
  const who = state === 'stopped' ? `the msgd that last ran on ${place}` : `the msgd running on ${place}`;
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

/** Options of both stores' inspections. */
export interface InspectOptions {
  env?: NodeJS.ProcessEnv;
  /** msgctl's own config file (null: none), compared with the one msgd records at start. */
  configFile?: string | null;
}

/** The migrations check; a schema from a newer msgd is said in migrate's own words (it changes nothing). */
async function migrationsCheck(status: MigrationStatus, refusal: () => Promise<unknown>): Promise<Check> {
  if (status.tooNew) {
    let message = 'the database was migrated by a newer msgd';
    try {
      await refusal(); // throws before changing anything: we want its message
    } catch (e) {
      message = describeError(e);
    }
    return { name: 'migrations', status: 'fail', message };
  }
  return status.pending.length
    ? {
        name: 'migrations',
        status: status.applied ? 'warn' : 'fail',
        message: `${status.pending.length} pending: ${status.pending.join(', ')} (msgctl migrate, or msgd applies them at start)`,
      }
    : { name: 'migrations', status: 'ok', message: `${status.applied} applied, none pending` };
}

/** The data checks, then msgd's config file, on a store whose schema is there; a read that fails is named. */
async function storeChecks(ctx: CoreCtx, opts: InspectOptions, place: string): Promise<Check[]> {
  try {
    const checks = await dataChecks(ctx);
    const server = opts.configFile === undefined ? null : await serverConfigCheck(ctx, opts.configFile, place);
    if (server) checks.push(server);
    return checks;
  } catch (e) {
    return [{ name: 'schema checks', status: 'fail', message: describeError(e) }];
  }
}

/**
 * Every check of a data directory, in order: the SQLite file's own (its directory, key file,
 * integrity, migrations), then msgd's data. `integrity: 'full'` runs PRAGMA integrity_check
 * (msgctl restore) rather than the faster quick_check.
 */
export async function inspect(
  dir: string,
  config: Config,
  opts: InspectOptions & { integrity?: 'quick' | 'full' } = {},
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
    checks.push(keyCheck(dd.keySource));
    const integrity = checkIntegrity(dd.db, opts.integrity === 'full');
    checks.push({
      name: 'database',
      status: integrity === 'ok' ? 'ok' : 'fail',
      message: `${dd.db.path}: ${integrity === 'ok' ? 'integrity ok' : integrity}`,
    });
    const status = migrationStatus(dd.db);
    checks.push(await migrationsCheck(status, async () => migrate(dd.db)));
    if (status.tooNew || status.applied === 0) return checks;
    checks.push(...(await storeChecks(coreCtxOf(dd, config), opts, 'this data directory')));
    return checks;
  } finally {
    dd.close();
  }
}

/**
 * The server's state and the settings msgd relies on: a standby or a read-only database takes
 * no sends; a database not in UTF8 refuses or mangles texts; fsync, synchronous_commit or
 * full_page_writes off lose, in a crash of the server, what msgd already answered 200.
 */
async function pgServerChecks(pg: PgStore): Promise<Check[]> {
  const s = (await pg.get<{
    version: string;
    standby: number;
    read_only: string;
    encoding: string;
    fsync: string;
    synchronous_commit: string;
    full_page_writes: string;
  }>(sql`SELECT current_setting('server_version') AS version,
                CASE WHEN pg_is_in_recovery() THEN 1 ELSE 0 END AS standby,
                current_setting('transaction_read_only') AS read_only,
                current_setting('server_encoding') AS encoding,
                current_setting('fsync') AS fsync,
                current_setting('synchronous_commit') AS synchronous_commit,
                current_setting('full_page_writes') AS full_page_writes`))!;
  const at = `PostgreSQL ${s.version} at ${pg.redactedUrl}`;
  const checks: Check[] = [];
  if (s.standby === 1) {
    checks.push({
      name: 'database',
      status: 'fail',
      message: `${at} is a standby (in recovery): msgd must use the primary, which takes writes`,
    });
  } else if (s.read_only === 'on') {
    checks.push({
      name: 'database',
      status: 'fail',
      message: `${at} is read-only (default_transaction_read_only is on for this database or user): msgd cannot write`,
    });
  } else {
    checks.push({ name: 'database', status: 'ok', message: `${at}: answers and takes writes` });
  }
  checks.push(
    s.encoding === 'UTF8'
      ? { name: 'encoding', status: 'ok', message: 'the database is UTF8' }
      : {
          name: 'encoding',
          status: 'fail',
          message: `the database's encoding is ${s.encoding}, not UTF8: texts, names and templates with characters outside it are refused${s.encoding === 'SQL_ASCII' ? ' or kept unchecked' : ''} (create the database with ENCODING 'UTF8' and move the data with pg_dump)`,
        },
  );
  const off = [
    ['fsync', s.fsync],
    ['synchronous_commit', s.synchronous_commit],
    ['full_page_writes', s.full_page_writes],
  ]
    .filter(([, v]) => v === 'off')
    .map(([name]) => name);
  checks.push(
    off.length
      ? {
          name: 'durability',
          status: 'warn',
          message: `${off.join(', ')} ${off.length === 1 ? 'is' : 'are'} off: a crash of the server or its machine can lose sends, debits and events msgd already answered (set ${off.map((n) => `${n} = on`).join(', ')})`,
        }
      : {
          name: 'durability',
          status: 'ok',
          message: 'fsync, synchronous_commit and full_page_writes on: what msgd answered survives a crash',
        },
  );
  return checks;
}

/**
 * Every check of a PostgreSQL database, in order: the server (reachable, version, takes writes,
 * the settings msgd relies on), the master key's source, the migrations, then msgd's data.
 */
export async function inspectPostgres(url: string, config: Config, opts: InspectOptions = {}): Promise<Check[]> {
  let pg: PgStore;
  try {
    pg = await connectPg(url, { logger: { warn: () => {} }, poolSize: 2, applicationName: 'msgctl' });
  } catch (e) {
    // Unreachable, refused, unknown database, or older than 15 (connectPg checks the version):
    // one line naming the URL, its password masked.
    return [{ name: 'database', status: 'fail', message: describeError(e) }];
  }
  const checks: Check[] = [];
  try {
    checks.push(...(await pgServerChecks(pg)));
    let key: Buffer | null = null;
    try {
      const given = loadMasterKeyWithoutDataDir(opts.env ?? process.env, config.masterKeyFile);
      key = given.key;
      checks.push(keyCheck(given.source));
    } catch (e) {
      checks.push({ name: 'master key', status: 'fail', message: describeError(e) });
    }
    const status = await migrationStatusIn(pg);
    checks.push(await migrationsCheck(status, () => migratePg(url)));
    if (status.tooNew || status.applied === 0 || !key) return checks;
    const ctx = coreCtxOf({ db: sqliteOnlyDb(), store: pg, masterKey: key }, config);
    checks.push(...(await storeChecks(ctx, opts, 'this database')));
    return checks;
  } catch (e) {
    // The server went away between two checks.
    return [...checks, { name: 'database', status: 'fail', message: describeError(e) }];
  } finally {
    await pg.close();
  }
}

/** Each store's own checks, chosen once by the configuration; both end with the checks of msgd's data. */
const STORE_CHECKS: Record<
  Dialect,
  (config: Config, opts: InspectOptions) => Promise<{ where: Record<string, string>; checks: Check[] }>
> = {
  sqlite: async (config, opts) => {
    const dir = resolve(config.dataDir);
    return { where: { data_dir: dir }, checks: await inspect(dir, config, opts) };
  },
  postgres: async (config, opts) => {
    const url = config.database.url!;
    return { where: { database: redactUrl(url) }, checks: await inspectPostgres(url, config, opts) };
  },
};

export function checkTable(checks: Check[]): string {
  return table(
    ['status', 'check', 'details'],
    checks.map((c) => [c.status, c.name, c.message]),
  );
}

async function doctor(globals: Globals): Promise<Result> {
  const config = configFor(globals);
  const configFile = configFileFor({ configPath: globals.config, env: globals.io?.env });
  const inspected = await STORE_CHECKS[storeKindOf(config)](config, { env: globals.io?.env, configFile });
  const checks: Check[] = [
    { name: 'configuration', status: 'ok', message: configFile ?? NO_CONFIG_FILE },
    ...inspected.checks,
  ];
  const failures = checks.filter((c) => c.status === 'fail').length;
  const warnings = checks.filter((c) => c.status === 'warn').length;
  const summary = `${failures} failed, ${count(warnings, 'warning')}, ${checks.length - failures - warnings} ok`;
  return {
    json: { ok: failures === 0, ...inspected.where, config_file: configFile, failures, warnings, checks },
    text: `${checkTable(checks)}

${summary}`,
    failure: failures ? `doctor: ${count(failures, 'check')} failed` : undefined,
  };
}

export function registerDoctor(program: Command) {
  program
    .command('doctor')
    .description(
      'check the store (the data directory, or the PostgreSQL server), schema, ledger, master key (does it open every stored secret?) and configuration; exit 1 if a check fails',
    )
    .addHelpText('after', examples('msgctl doctor', 'msgctl doctor --json | jq .checks'))
    .action(withGlobals(doctor));
}
