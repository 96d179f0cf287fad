import type { Command } from 'commander';
import { assignChannel, channelJson, listChannels, unassignChannel, type Channel } from '../core/channels.js';
import { CHANNEL_TYPES } from '../core/context.js';
import { getGatewayRow } from '../core/gateways.js';
import { getPartner, listPartners } from '../core/partners.js';
import { withCli, type Cli } from './context.js';
import { channelTypeArg } from './args.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { kv, lines, table, when, type Result } from './output.js';

/** The channel with its partner slug and gateway, as `channel list` shows it. */
function full(cli: Cli, c: Channel) {
  const gw = getGatewayRow(cli.ctx, c.gateway_id);
  return {
    ...channelJson(c),
    partner: getPartner(cli.ctx, c.partner_id).slug,
    gateway: { id: gw.id, name: gw.name, kind: gw.kind },
  };
}

function describe(cli: Cli, c: Channel): string {
  const gw = getGatewayRow(cli.ctx, c.gateway_id);
  const partner = getPartner(cli.ctx, c.partner_id);
  return kv(
    [
      ['id', c.id],
      ['partner', partner.slug],
      ['type', c.type],
      ['sender', c.sender],
      ['gateway', `${gw.name} (${gw.kind})`],
      ['status', c.status],
    ],
    '  ',
  );
}

function assign(cli: Cli, partner: string, gateway: string, type: string, opts: { from?: string }): Result {
  const c = assignChannel(cli.ctx, { partner, gateway, type: channelTypeArg(type), sender: opts.from }, cli.actor);
  return {
    json: full(cli, c),
    text: lines(`Assigned ${c.type} to ${getPartner(cli.ctx, c.partner_id).slug}.`, describe(cli, c)),
  };
}

function unassign(cli: Cli, partner: string | undefined, type: string | undefined, opts: { id?: string }): Result {
  if (opts.id && (partner || type)) throw new UsageError('give either --id <channel-id> or <partner> <type>, not both');
  if (!opts.id && !(partner && type)) throw new UsageError('give <partner> <type>, or --id <channel-id>');
  const c = unassignChannel(
    cli.ctx,
    opts.id ? { channel: opts.id } : { partner, type: channelTypeArg(type!) },
    cli.actor,
  );
  return {
    json: full(cli, c),
    text: lines(`Unassigned ${c.type} (${c.sender}): sends on it are refused from now on.`, describe(cli, c)),
  };
}

function list(cli: Cli, partner: string | undefined, opts: { all?: boolean }): Result {
  const rows = listChannels(cli.ctx, { partner, includeInactive: opts.all });
  const slugs = new Map(listPartners(cli.ctx).map((p) => [p.id, p.slug]));
  const text = rows.length
    ? table(
        ['partner', 'type', 'sender', 'gateway', 'kind', 'status', 'created', 'id'],
        rows.map((c) => [
          slugs.get(c.partner_id),
          c.type,
          c.sender,
          c.gateway_name,
          c.gateway_kind,
          c.status === 'active' && c.gateway_status === 'disabled' ? 'active (gateway disabled)' : c.status,
          when(c.created_at),
          c.id,
        ]),
      )
    : 'No channels assigned. Assign one with: msgctl channel assign <partner> <gateway> <type> --from <sender>';
  return { json: { data: rows.map((c) => ({ ...channelJson(c), partner: slugs.get(c.partner_id) ?? null })) }, text };
}

export function registerChannel(program: Command) {
  const channel = program.command('channel').description("assign gateways to partners' channels");

  channel
    .command('assign')
    .description('let a partner send on a channel type through a gateway')
    .argument('<partner>', 'slug or id')
    .argument('<gateway>', 'name or id')
    .argument('<type>', CHANNEL_TYPES.join(', '))
    .option('--from <sender>', 'sender: E.164 number (sms, whatsapp), page id, Instagram account id or from-address')
    .addHelpText(
      'after',
      examples(
        'msgctl channel assign acme twilio-main sms --from +15550001111',
        'msgctl channel assign acme relay email --from news@acme.example',
        'msgctl channel assign acme fb-page messenger',
      ),
    )
    .action(withCli(assign));

  channel
    .command('unassign')
    .description("remove a partner's channel")
    .argument('[partner]', 'slug or id')
    .argument('[type]', CHANNEL_TYPES.join(', '))
    .option('--id <channel-id>', 'the channel id instead of <partner> <type>')
    .addHelpText('after', examples('msgctl channel unassign acme sms', 'msgctl channel unassign --id ch_01jd...'))
    .action(withCli(unassign));

  channel
    .command('list')
    .description('list active channels, of one partner or all')
    .argument('[partner]', 'slug or id')
    .option('--all', 'include unassigned (inactive) channels')
    .addHelpText('after', examples('msgctl channel list', 'msgctl channel list acme --all'))
    .action(withCli(list));
}
