import type { Command } from 'commander';
import { circuitJson, circuitText, readCircuit } from '../core/circuits.js';
import type { Config } from '../config/schema.js';
import { listChannels } from '../core/channels.js';
import type { GatewayKind } from '../core/context.js';
import {
  addGateway,
  assertGatewayRemovable,
  getGateway,
  listGateways,
  removeGateway,
  updateGateway,
  type GatewayView,
} from '../core/gateways.js';
import { listPartners } from '../core/partners.js';
import { AppError } from '../lib/errors.js';
import { gatewayKinds } from '../providers/kinds.js';
import { collect } from './args.js';
import { withCli, type Cli } from './context.js';
import { confirm, YES_FLAG } from './confirm.js';
import { UsageError } from './errors.js';
import { SECRET_HINT, collectSecrets, settingsFromFlags } from './gateway-input.js';
import { registerGatewayTemplates } from './gateway-templates.js';
import { examples } from './help.js';
import { kv, lines, table, when, type Result } from './output.js';

const MESSENGER_KINDS: readonly GatewayKind[] = ['meta_messenger', 'meta_instagram'];

/** Where the operator points the provider's webhooks for this gateway; null when it has none. */
export function webhookUrl(config: Config, g: { id: string; kind: GatewayKind }): string | null {
  if (g.kind === 'smtp') return null;
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  const base = (config.server.publicUrl ?? `http://${host}:${config.server.port}`).replace(/\/+$/, '');
  const path = MESSENGER_KINDS.includes(g.kind) ? '/api/webhook-messenger.php' : '/api/webhook.php';
  return `${base}${path}?gateway=${encodeURIComponent(g.id)}`;
}

function gatewayJson(cli: Cli, g: GatewayView) {
  return { ...g, webhook_url: webhookUrl(cli.config, g) };
}

function describe(cli: Cli, g: GatewayView, extra: [string, string][] = []): string {
  const url = webhookUrl(cli.config, g);
  const settings = Object.entries(g.settings);
  return lines(
    kv(
      [
        ['id', g.id],
        ['name', g.name],
        ['kind', `${g.kind} (${cli.ctx.gatewayKinds.get(g.kind).label})`],
        ['status', g.status],
        ['serves', cli.ctx.gatewayKinds.get(g.kind).channels.join(', ')],
        ['secrets', g.secret_names.length ? `${g.secret_names.join(', ')} (values never shown)` : 'none'],
        ['webhook url', url ?? 'none (this kind sends no webhooks)'],
        ['updated', when(Date.parse(g.updated_at))],
        ...extra,
      ],
      '  ',
    ),
    url && !cli.config.server.publicUrl
      ? '  (set server.publicUrl in the config to the address the provider can reach)'
      : null,
    settings.length
      ? lines(
          '  settings:',
          kv(
            settings.map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
            '    ',
          ),
        )
      : null,
  );
}

function withSecretHint(e: unknown): never {
  if (e instanceof AppError && e.details.some((d) => /required secret/.test(d.message))) {
    throw new AppError(e.code, e.message, [...e.details, SECRET_HINT]);
  }
  throw e;
}

interface AddOpts {
  name: string;
  set?: string[];
  secretStdin?: string;
  secretEnv?: string[];
}

async function add(cli: Cli, kind: string, opts: AddOpts): Promise<Result> {
  if (!cli.ctx.gatewayKinds.has(kind)) {
    const known = cli.ctx.gatewayKinds.specs.map((k) => k.kind).join(', ');
    throw new UsageError(`unknown gateway kind "${kind}": kind: one of ${known}`);
  }
  const settings = settingsFromFlags(opts.set);
  const secrets = await collectSecrets(opts, cli.io);
  let g: GatewayView;
  try {
    g = await addGateway(cli.ctx, { kind, name: opts.name, settings, secrets }, cli.actor);
  } catch (e) {
    withSecretHint(e);
  }
  return { json: gatewayJson(cli, g), text: lines(`Added ${kind} gateway ${g.name}.`, describe(cli, g)) };
}

interface UpdateOpts {
  set?: string[];
  secretStdin?: string;
  secretEnv?: string[];
  unsetSecret?: string[];
  yes?: boolean;
  unset?: string[];
  disable?: boolean;
  enable?: boolean;
}

async function update(cli: Cli, ref: string, opts: UpdateOpts): Promise<Result> {
  if (opts.disable && opts.enable) throw new UsageError('--disable and --enable exclude each other');
  if (
    !opts.set?.length &&
    !opts.unset?.length &&
    opts.secretStdin === undefined &&
    !opts.secretEnv?.length &&
    !opts.unsetSecret?.length &&
    !opts.disable &&
    !opts.enable
  ) {
    throw new UsageError(
      'nothing to change: give --set, --unset, --secret-stdin, --secret-env, --unset-secret, --disable or --enable',
    );
  }
  const current = await getGateway(cli.ctx, ref);
  const settings = settingsFromFlags(opts.set);
  // A stored secret is never shown again: removing it loses it for good.
  if (opts.unsetSecret?.length)
    await confirm(
      cli.io,
      `Remove secret ${opts.unsetSecret.join(', ')} of gateway ${current.name} (${current.id})`,
      opts.yes,
    );
  const secrets = await collectSecrets(opts, cli.io);
  const status = opts.disable ? 'disabled' : opts.enable ? 'active' : undefined;
  let g: GatewayView;
  try {
    g = await updateGateway(
      cli.ctx,
      current.id,
      { settings, unsetSettings: opts.unset, secrets, unsetSecrets: opts.unsetSecret, status },
      cli.actor,
    );
  } catch (e) {
    withSecretHint(e);
  }
  return { json: gatewayJson(cli, g), text: lines(`Updated gateway ${g.name}.`, describe(cli, g)) };
}

async function list(cli: Cli): Promise<Result> {
  const rows = await listGateways(cli.ctx);
  const assigned = new Map<string, number>();
  for (const c of await listChannels(cli.ctx)) assigned.set(c.gateway_id, (assigned.get(c.gateway_id) ?? 0) + 1);
  const text = rows.length
    ? table(
        ['name', 'kind', 'status', 'channels', 'secrets', 'id'],
        rows.map((g) => [g.name, g.kind, g.status, assigned.get(g.id) ?? 0, g.secret_names.join(','), g.id]),
      )
    : 'No gateways yet. Add one with: msgctl gateway add <kind> --name <name> ...';
  return { json: { data: rows.map((g) => gatewayJson(cli, g)) }, text };
}

async function show(cli: Cli, ref: string): Promise<Result> {
  const g = await getGateway(cli.ctx, ref);
  const channels = (await listChannels(cli.ctx)).filter((c) => c.gateway_id === g.id);
  const slugs = new Map((await listPartners(cli.ctx)).map((p) => [p.id, p.slug]));
  // As msgd last published it (msgd keeps the breaker in memory; every circuit starts closed).
  const circuit = await readCircuit(cli.ctx, g.id);
  return {
    json: {
      ...gatewayJson(cli, g),
      circuit: circuitJson(circuit),
      channels: channels.map((c) => ({
        id: c.id,
        partner_id: c.partner_id,
        partner: slugs.get(c.partner_id) ?? null,
        type: c.type,
        sender: c.sender,
        position: c.position,
        role: c.position === 0 ? 'primary' : 'fallback',
      })),
    },
    text: lines(
      describe(cli, g, [['circuit', circuitText(circuit, cli.ctx.now())]]),
      '',
      channels.length
        ? table(
            ['channel', 'role', 'sender', 'partner', 'id'],
            channels.map((c) => [
              c.type,
              c.position === 0 ? 'primary' : `fallback ${c.position}`,
              c.sender,
              slugs.get(c.partner_id),
              c.id,
            ]),
          )
        : 'Not assigned to any partner.',
    ),
  };
}

// The help is written before any data directory is opened: from the registry msgctl gives core.
const KINDS_HELP = gatewayKinds.specs
  .map(
    (k) =>
      `  ${k.kind.padEnd(15)} settings: ${Object.keys(k.settings.shape).join(', ')}; secrets: ${[...k.secrets.required.map((s) => `${s} (required)`), ...k.secrets.optional].join(', ') || 'none'}`,
  )
  .join('\n');

export function registerGateway(program: Command) {
  const gateway = program.command('gateway').description('provider accounts: add, show, update, remove');
  const secretOptions = (c: Command) =>
    c
      .option('--set <key=value>', 'a non-secret setting (repeatable)', collect)
      .option('--secret-stdin <name>', 'read the secret <name> from stdin (one trailing newline is dropped)')
      .option(
        '--secret-env <name=ENV_VAR>',
        'take the secret <name> from environment variable ENV_VAR (repeatable)',
        collect,
      );

  secretOptions(
    gateway
      .command('add')
      .description('add a provider account; secrets come from stdin or env vars, never from arguments')
      .argument('<kind>', gatewayKinds.specs.map((k) => k.kind).join(', '))
      .requiredOption('--name <name>', 'unique name: letters, digits, dot, dash, underscore'),
  )
    .addHelpText(
      'after',
      `\nKinds:\n${KINDS_HELP}\n` +
        examples(
          'echo "$AUTH_TOKEN" | msgctl gateway add twilio --name twilio-main --set account_sid=AC123 --secret-stdin auth_token',
          'msgctl gateway add whatsapp_cloud --name wa --set phone_number_id=1234567890 --set waba_id=102290129340398 --secret-env access_token=WA_TOKEN --secret-env app_secret=WA_APP_SECRET',
          'msgctl gateway add meta_instagram --name ig --set ig_account_id=17841400000000001 --secret-env access_token=IG_TOKEN   # Instagram Login: graph.instagram.com',
          'msgctl gateway add meta_instagram --name ig-page --set ig_account_id=17841400000000001 --set page_id=682498302938465 --secret-env access_token=PAGE_TOKEN   # Facebook Login: via the page',
          'msgctl gateway add smtp --name relay --set host=smtp.example.com --set port=587 --set user=mailer --secret-env password=SMTP_PASSWORD',
          'msgctl gateway add sandbox --name demo --set delivery_delay_ms=100',
        ),
    )
    .action(withCli(add));

  gateway
    .command('list')
    .description('list gateways')
    .addHelpText('after', examples('msgctl gateway list'))
    .action(withCli(list));

  gateway
    .command('show')
    .description('show settings, secret names (never values) and the webhook URL to register with the provider')
    .argument('<gateway>', 'name or id')
    .addHelpText('after', examples('msgctl gateway show twilio-main'))
    .action(withCli(show));

  secretOptions(
    gateway
      .command('update')
      .description('change settings or secrets, or disable/enable a gateway')
      .argument('<gateway>', 'name or id'),
  )
    .option('--unset <key>', 'remove a setting, back to its default if it has one (repeatable)', collect)
    .option('--unset-secret <name>', 'remove an optional secret (repeatable; asks first, or give --yes)', collect)
    .option(...YES_FLAG)
    .option('--disable', 'pause this gateway: queued messages wait (no tries spent), new sends get 403')
    .option('--enable', 'send through this gateway again')
    .addHelpText(
      'after',
      examples(
        'msgctl gateway update wa --secret-env app_secret=WA_APP_SECRET',
        'printf %s "$NEW_TOKEN" | msgctl gateway update twilio-main --secret-stdin auth_token',
        'msgctl gateway update relay --set port=465 --set secure=true',
        'msgctl gateway update twilio-main --disable',
        'msgctl gateway update fb-page --set messaging_type=RESPONSE --unset tag',
        'msgctl gateway update wa --set customer_service_window=off   # inbound goes elsewhere: do not enforce the 24 h window',
      ),
    )
    .action(withCli(update));

  registerGatewayTemplates(gateway);

  gateway
    .command('remove')
    .description('remove a gateway that no active channel uses')
    .argument('<gateway>', 'name or id')
    .option(...YES_FLAG)
    .addHelpText(
      'after',
      examples('msgctl gateway remove twilio-old', 'msgctl gateway remove twilio-old --yes   # in a script'),
    )
    .action(
      withCli(async (cli, ref: string, opts: { yes?: boolean }) => {
        // Refused before asking: a yes to a removal that cannot happen helps no one.
        await assertGatewayRemovable(cli.ctx, ref);
        const found = await getGateway(cli.ctx, ref);
        await confirm(
          cli.io,
          `Remove ${found.kind} gateway ${found.name} (${found.id}) and its stored secrets`,
          opts.yes,
        );
        const g = await removeGateway(cli.ctx, found.id, cli.actor);
        return { json: gatewayJson(cli, g), text: `Removed gateway ${g.name} (${g.id}).` };
      }),
    );
}
