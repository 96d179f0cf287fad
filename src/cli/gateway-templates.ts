import type { Command } from 'commander';
import { getGateway } from '../core/gateways.js';
import { listTemplates, templateJson, templateSync, type TemplateSpec } from '../core/whatsapp-templates.js';
import { AppError } from '../lib/errors.js';
import { syncGatewayTemplatesOnce } from '../jobs/template-sync.js';
import { withCli, type Cli } from './context.js';
import { examples } from './help.js';
import { lines, table, when, type Result } from './output.js';

// msgctl gateway templates: a WhatsApp Cloud gateway's template catalogue, read from Meta on
// demand (msgd also reads it on start and every four hours) and listed as msgd checks sends.

async function sync(cli: Cli, ref: string): Promise<Result> {
  const out = await syncGatewayTemplatesOnce(cli.ctx, cli.config.dispatch.timeoutMs, ref);
  if ('error' in out)
    throw new AppError(
      'provider_error',
      `could not read the template catalogue of ${out.gateway}: ${out.error}; the last catalogue read stays in force`,
    );
  return {
    json: out,
    text: `Read ${out.templates} template${out.templates === 1 ? '' : 's'} of ${out.gateway} from Meta; template sends through it are checked against them.`,
  };
}

/** What a send must give, in a few words: "header image, body 2, button 0". */
function wants(specJson: string): string {
  const spec = JSON.parse(specJson) as TemplateSpec;
  if (spec.unchecked) return 'unchecked';
  const parts: string[] = [];
  if (spec.header) parts.push(spec.header.kind === 'media' ? `header ${spec.header.type}` : 'header text');
  if (spec.body.length) parts.push(`body ${spec.format === 'named' ? spec.body.join(' ') : spec.body.length}`);
  for (const b of spec.buttons) if (b.params > 0) parts.push(`button ${b.index}`);
  return parts.join(', ') || 'none';
}

async function list(
  cli: Cli,
  ref: string,
  opts: { status?: string; category?: string; name?: string },
): Promise<Result> {
  const g = await getGateway(cli.ctx, ref);
  if (g.kind !== 'whatsapp_cloud')
    throw new AppError(
      'invalid_request',
      `${g.name} is a ${g.kind} gateway: only WhatsApp Cloud gateways have templates`,
    );
  const rows = await listTemplates(cli.ctx, [g.id], { name: opts.name, status: opts.status, category: opts.category });
  rows.sort((a, b) => a.name.localeCompare(b.name) || a.language.localeCompare(b.language));
  const s = await templateSync(cli.ctx, g.id);
  const state = !s?.synced_at
    ? `Never read from Meta${s?.error ? ` (last try: ${s.error})` : ''}: template sends through ${g.name} are not checked. Read it with: msgctl gateway templates sync ${g.name}`
    : `Read from Meta ${when(s.synced_at)} UTC${s.error ? `; the last try since failed: ${s.error}` : ''}.`;
  return {
    json: {
      gateway: g.name,
      synced_at: s?.synced_at ? new Date(s.synced_at).toISOString() : null,
      last_error: s?.error ?? null,
      data: rows.map(templateJson),
    },
    text: lines(
      rows.length
        ? table(
            ['name', 'language', 'status', 'category', 'parameters'],
            rows.map((t) => [t.name, t.language, t.status, t.category, wants(t.spec)]),
          )
        : 'No templates.',
      state,
    ),
  };
}

export function registerGatewayTemplates(gateway: Command) {
  const templates = gateway
    .command('templates')
    .description("a WhatsApp Cloud gateway's template catalogue, as template sends are checked against it");

  templates
    .command('sync')
    .description("read the gateway's templates from Meta now (msgd also does on start and every four hours)")
    .argument('<gateway>', 'name or id of a whatsapp_cloud gateway with a waba_id')
    .addHelpText('after', examples('msgctl gateway templates sync wa'))
    .action(withCli(sync));

  templates
    .command('list')
    .description('list the templates msgd knows, with their status, category and the parameters a send gives')
    .argument('<gateway>', 'name or id')
    .option('--status <status>', 'only this status, e.g. APPROVED or PAUSED')
    .option('--category <category>', 'only marketing, utility or authentication')
    .option('--name <name>', 'only this template name')
    .addHelpText(
      'after',
      examples('msgctl gateway templates list wa', 'msgctl gateway templates list wa --status PAUSED --json'),
    )
    .action(withCli(list));
}
