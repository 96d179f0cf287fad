import type { Command } from 'commander';
import {
  addFallback,
  assignChannel,
  channelJson,
  FAILOVER_TYPES,
  listChannels,
  removeFallback,
  routeOrderIn,
  unassignChannel,
  type Channel,
} from '../core/channels.js';
import { CHANNEL_TYPES, type ChannelType } from '../core/context.js';
import { getGatewayRow } from '../core/gateways.js';
import { getPartner, listPartners } from '../core/partners.js';
import { withCli, type Cli } from './context.js';
import { channelTypeArg } from './args.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { kv, lines, table, when, type Result } from './output.js';

/** The channel with its partner slug and gateway, as `channel list` shows it. */
async function full(cli: Cli, c: Channel) {
  const gw = await getGatewayRow(cli.ctx, c.gateway_id);
  return {
    ...channelJson(c),
    partner: (await getPartner(cli.ctx, c.partner_id)).slug,
    gateway: { id: gw.id, name: gw.name, kind: gw.kind },
  };
}

async function describe(cli: Cli, c: Channel): Promise<string> {
  const gw = await getGatewayRow(cli.ctx, c.gateway_id);
  const partner = await getPartner(cli.ctx, c.partner_id);
  return kv(
    [
      ['id', c.id],
      ['partner', partner.slug],
      ['type', c.type],
      ['sender', c.sender],
      ['gateway', `${gw.name} (${gw.kind})`],
      ['order', c.position === 0 ? 'primary' : `fallback ${c.position}`],
      ['status', c.status],
    ],
    '  ',
  );
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** The order as `channel fallback list` and `channel assign --fallback` show it. */
async function orderText(cli: Cli, partnerId: string, type: ChannelType): Promise<string> {
  const order = await routeOrderIn(cli.ctx.store, partnerId, type);
  return table(
    ['#', 'role', 'gateway', 'kind', 'sender', 'gateway status'],
    order.map((c) => [
      String(c.position),
      c.position === 0 ? 'primary' : 'fallback',
      c.gateway_name,
      c.gateway_kind,
      c.sender,
      c.gateway_status,
    ]),
  );
}

async function assign(
  cli: Cli,
  partner: string,
  gateway: string,
  type: string,
  opts: { from?: string; fallback?: string[]; fallbackFrom?: string[] },
): Promise<Result> {
  const t = channelTypeArg(type);
  const fallbacks = opts.fallback ?? [];
  const froms = opts.fallbackFrom ?? [];
  if (froms.length > fallbacks.length)
    throw new UsageError('each --fallback-from gives the sender of the --fallback at the same place; give fewer');
  if (fallbacks.length && !FAILOVER_TYPES.includes(t))
    throw new UsageError(`fallback gateways are for ${FAILOVER_TYPES.join(' and ')} channels only`);
  const c = await assignChannel(cli.ctx, { partner, gateway, type: t, sender: opts.from }, cli.actor);
  const added = [];
  for (const [i, g] of fallbacks.entries())
    added.push(await addFallback(cli.ctx, { partner: c.partner_id, type: t, gateway: g, sender: froms[i] }, cli.actor));
  const slug = (await getPartner(cli.ctx, c.partner_id)).slug;
  return {
    json: added.length
      ? { ...(await full(cli, c)), fallbacks: await Promise.all(added.map((f) => full(cli, f))) }
      : await full(cli, c),
    text: lines(
      `Assigned ${c.type} to ${slug}.`,
      await describe(cli, c),
      added.length ? `Gateways in the order they are tried:\n${await orderText(cli, c.partner_id, t)}` : null,
    ),
  };
}

async function fallbackAdd(
  cli: Cli,
  partner: string,
  type: string,
  gateway: string,
  opts: { from?: string },
): Promise<Result> {
  const c = await addFallback(cli.ctx, { partner, type, gateway, sender: opts.from }, cli.actor);
  return {
    json: await full(cli, c),
    text: lines(
      `Added ${(await getGatewayRow(cli.ctx, c.gateway_id)).name} as fallback ${c.position} of ${(await getPartner(cli.ctx, c.partner_id)).slug}'s ${c.type}.`,
      await orderText(cli, c.partner_id, c.type),
    ),
  };
}

async function fallbackList(cli: Cli, partner: string, type: string): Promise<Result> {
  const p = await getPartner(cli.ctx, partner);
  const t = channelTypeArg(type);
  const order = await routeOrderIn(cli.ctx.store, p.id, t);
  return {
    json: { data: order.map((c) => ({ ...channelJson(c), partner: p.slug })) },
    text: order.length
      ? await orderText(cli, p.id, t)
      : `${p.slug} has no ${t} channel. Assign one with: msgctl channel assign ${p.slug} <gateway> ${t} --from <sender>`,
  };
}

async function fallbackRemove(cli: Cli, partner: string, type: string, gateway: string): Promise<Result> {
  const c = await removeFallback(cli.ctx, { partner, type, gateway }, cli.actor);
  return {
    json: await full(cli, c),
    text: lines(
      `Removed ${(await getGatewayRow(cli.ctx, c.gateway_id)).name} from ${(await getPartner(cli.ctx, c.partner_id)).slug}'s ${c.type} fallbacks.`,
      await orderText(cli, c.partner_id, c.type),
    ),
  };
}

async function unassign(
  cli: Cli,
  partner: string | undefined,
  type: string | undefined,
  opts: { id?: string },
): Promise<Result> {
  if (opts.id && (partner || type)) throw new UsageError('give either --id <channel-id> or <partner> <type>, not both');
  if (!opts.id && !(partner && type)) throw new UsageError('give <partner> <type>, or --id <channel-id>');
  const c = await unassignChannel(
    cli.ctx,
    opts.id ? { channel: opts.id } : { partner, type: channelTypeArg(type!) },
    cli.actor,
  );
  return {
    json: await full(cli, c),
    text: lines(`Unassigned ${c.type} (${c.sender}): sends on it are refused from now on.`, await describe(cli, c)),
  };
}

async function list(cli: Cli, partner: string | undefined, opts: { all?: boolean }): Promise<Result> {
  const rows = await listChannels(cli.ctx, { partner, includeInactive: opts.all });
  const slugs = new Map((await listPartners(cli.ctx)).map((p) => [p.id, p.slug]));
  const text = rows.length
    ? table(
        ['partner', 'type', '#', 'sender', 'gateway', 'kind', 'status', 'created', 'id'],
        rows.map((c) => [
          slugs.get(c.partner_id),
          c.type,
          c.status === 'active' ? (c.position === 0 ? 'primary' : `fallback ${c.position}`) : '',
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
    .option(
      '--fallback <gateway>',
      'sms, email: a gateway tried when the ones before it cannot take a message (repeatable, in order)',
      collect,
    )
    .option(
      '--fallback-from <sender>',
      "the sender of the --fallback at the same place (default: the primary's)",
      collect,
    )
    .addHelpText(
      'after',
      examples(
        'msgctl channel assign acme twilio-main sms --from +15550001111',
        'msgctl channel assign acme twilio-main sms --from +15550001111 --fallback twilio-backup --fallback-from +15550002222',
        'msgctl channel assign acme relay email --from news@acme.example --fallback sendgrid',
        'msgctl channel assign acme fb-page messenger',
      ),
    )
    .action(withCli(assign));

  const fallback = channel
    .command('fallback')
    .description(
      "the fallback gateways of a partner's SMS or email channel, tried in order when a gateway certainly did not take a message",
    );
  fallback
    .command('add')
    .description('add a fallback gateway at the end of the order')
    .argument('<partner>', 'slug or id')
    .argument('<type>', FAILOVER_TYPES.join(', '))
    .argument('<gateway>', 'name or id')
    .option('--from <sender>', "its sender (default: the primary's)")
    .addHelpText(
      'after',
      examples(
        'msgctl channel fallback add acme sms twilio-backup --from +15550002222',
        'msgctl channel fallback add acme email smtp-relay',
      ),
    )
    .action(withCli(fallbackAdd));
  fallback
    .command('list')
    .description('the gateways of a channel in the order they are tried')
    .argument('<partner>', 'slug or id')
    .argument('<type>', CHANNEL_TYPES.join(', '))
    .addHelpText('after', examples('msgctl channel fallback list acme sms --json'))
    .action(withCli(fallbackList));
  fallback
    .command('remove')
    .description('remove a fallback gateway (the ones after it move up)')
    .argument('<partner>', 'slug or id')
    .argument('<type>', FAILOVER_TYPES.join(', '))
    .argument('<gateway>', 'name or id')
    .addHelpText('after', examples('msgctl channel fallback remove acme sms twilio-backup'))
    .action(withCli(fallbackRemove));

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
