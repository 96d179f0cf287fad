import type { Command } from 'commander';
import { CHANNEL_TYPES } from '../core/context.js';
import { getPartner, listPartners } from '../core/partners.js';
import { getGatewayRow } from '../core/gateways.js';
import { listPrices, priceJson, setPrice, unsetPrice, type Price, type PriceListRow } from '../core/prices.js';
import { channelTypeArg, moneyArg } from './args.js';
import { withCli, type Cli } from './context.js';
import { examples } from './help.js';
import { lines, money, table, when, type Result } from './output.js';

// A default price has no currency of its own: each partner is charged it in theirs.
async function currencyOf(cli: Cli, row: { partner_id: string }): Promise<string | undefined> {
  return row.partner_id ? (await getPartner(cli.ctx, row.partner_id)).currency : undefined;
}

// Same money shape everywhere, even where a default price has no currency of its own.
function json(row: PriceListRow, currency: string | undefined) {
  const j = priceJson(row, currency);
  return { ...j, amount: { ...j.amount, currency: currency ?? null } };
}

const per = (channel: string) => (channel === 'sms' ? 'per segment' : 'per message');

interface Scope {
  partner?: string;
  gateway?: string;
  category?: string;
}

async function listRow(cli: Cli, p: Price): Promise<PriceListRow> {
  return {
    ...p,
    partner_slug: p.partner_id ? (await getPartner(cli.ctx, p.partner_id)).slug : null,
    gateway_name: p.gateway_id ? (await getGatewayRow(cli.ctx, p.gateway_id)).name : null,
  };
}

/** Who a price applies to, in the words of its place in the precedence. */
function appliesTo(r: Pick<PriceListRow, 'partner_slug' | 'gateway_name'>): string {
  if (r.partner_slug && r.gateway_name) return `${r.partner_slug} through ${r.gateway_name}`;
  if (r.gateway_name) return `through ${r.gateway_name}`;
  return r.partner_slug ?? 'default';
}

async function set(cli: Cli, channel: string, amount: string, opts: Scope): Promise<Result> {
  const type = channelTypeArg(channel);
  const micro = moneyArg(amount, 'non-negative', 'a price');
  const p = await setPrice(
    cli.ctx,
    { channel: type, amount: micro, partner: opts.partner, gateway: opts.gateway, category: opts.category },
    cli.actor,
  );
  const row = await listRow(cli, p);
  if (p.category) {
    const currency = await currencyOf(cli, row);
    return {
      json: json(row, currency),
      text: lines(
        `${p.category} ${p.channel_type} templates now cost ${money(p.amount, currency)} per message ${row.partner_slug ? `for ${row.partner_slug}` : "by default, in each partner's currency"}, before any other WhatsApp price.`,
        p.category === 'utility'
          ? 'Utility templates sent while the customer-service window is open are free, as Meta charges them.'
          : null,
      ),
    };
  }
  const currency = await currencyOf(cli, row);
  const whom =
    row.partner_slug && row.gateway_name
      ? `for ${row.partner_slug}'s messages sent through ${row.gateway_name}, before any other price`
      : row.gateway_name
        ? `for messages sent through ${row.gateway_name}, unless a partner has its own price for that gateway`
        : row.partner_slug
          ? `for ${row.partner_slug}, overriding the default (a gateway's own price comes first)`
          : "the default for partners without an override, in each partner's currency";
  return {
    json: json(row, currency),
    text: lines(
      `${p.channel_type} now costs ${money(p.amount, currency)} ${per(p.channel_type)}: ${whom}.`,
      p.channel_type === 'sms'
        ? 'An SMS is charged per segment: up to 160 GSM-7 or 70 UCS-2 characters in one; longer texts 153 / 67 per segment.'
        : null,
    ),
  };
}

async function unset(cli: Cli, channel: string, opts: Scope): Promise<Result> {
  const p = await unsetPrice(
    cli.ctx,
    { channel: channelTypeArg(channel), partner: opts.partner, gateway: opts.gateway, category: opts.category },
    cli.actor,
  );
  const row = await listRow(cli, p);
  const text = p.category
    ? `Removed the ${p.category} template price${row.partner_slug ? ` of ${row.partner_slug}` : ''}; the next price in precedence applies again.`
    : row.partner_slug || row.gateway_name
      ? `Removed the ${p.channel_type} price ${appliesTo(row)}; the next price in precedence applies again.`
      : `Removed the default ${p.channel_type} price; partners without an override now send ${p.channel_type} for free.`;
  return { json: { removed: json(row, await currencyOf(cli, row)) }, text };
}

async function list(cli: Cli, opts: { partner?: string }): Promise<Result> {
  const rows = await listPrices(cli.ctx, { partner: opts.partner });
  const currencies = new Map((await listPartners(cli.ctx)).map((p) => [p.id, p.currency]));
  const cur = (r: PriceListRow) => (r.partner_id ? currencies.get(r.partner_id) : undefined);
  const text = rows.length
    ? table(
        ['channel', 'applies to', 'amount', 'per', 'updated'],
        rows.map((r) => [
          r.channel_type,
          r.category ? `${appliesTo(r)}, ${r.category} templates` : appliesTo(r),
          money(r.amount, cur(r)),
          per(r.channel_type).slice(4),
          when(r.updated_at),
        ]),
        { right: [2] },
      )
    : 'No prices set: every channel is free. Set one with: msgctl price set <channel> <amount>';
  return { json: { data: rows.map((r) => json(r, cur(r))) }, text };
}

export function registerPrice(program: Command) {
  const price = program
    .command('price')
    .description(
      'prices per channel type, with per-template-category, per-gateway and per-partner overrides (partner+category, category, partner+gateway, gateway, partner, default)',
    );

  price
    .command('set')
    .description('set the price of a channel type (SMS: per segment)')
    .argument('<channel>', CHANNEL_TYPES.join(', '))
    .argument('<amount>', 'decimal amount, up to 6 decimals, e.g. 0.0075')
    .option('--partner <partner>', "override for one partner (in that partner's currency)")
    .option('--gateway <gateway>', 'the price of messages sent through this gateway (a route of its own)')
    .option(
      '--category <category>',
      'WhatsApp templates of this Meta category only: marketing, utility or authentication (on every gateway; before the other prices)',
    )
    .addHelpText(
      'after',
      examples(
        'msgctl price set sms 0.0075',
        'msgctl price set whatsapp 0.02 --partner acme',
        'msgctl price set sms 0.0090 --gateway tw-backup',
        'msgctl price set sms 0.0080 --gateway tw-backup --partner acme',
        'msgctl price set whatsapp 0.025 --category marketing',
        'msgctl price set whatsapp 0.004 --category utility --partner acme',
      ) +
        "\nWhich price a message pays: for a WhatsApp template, the partner's price for its category, else the category's price; then the partner's price for the gateway that sends it, else that gateway's price, else the partner's price, else the default.",
    )
    .action(withCli(set));

  price
    .command('unset')
    .description('remove a default price or a partner override')
    .argument('<channel>', CHANNEL_TYPES.join(', '))
    .option('--partner <partner>', 'remove the override of this partner')
    .option('--gateway <gateway>', 'remove the price of this gateway')
    .option('--category <category>', 'remove the price of this WhatsApp template category')
    .addHelpText(
      'after',
      examples(
        'msgctl price unset whatsapp --partner acme',
        'msgctl price unset sms --gateway tw-backup',
        'msgctl price unset whatsapp --category marketing',
      ),
    )
    .action(withCli(unset));

  price
    .command('list')
    .description("list prices; with --partner, the defaults and that partner's overrides")
    .option('--partner <partner>', 'slug or id')
    .addHelpText('after', examples('msgctl price list', 'msgctl price list --partner acme'))
    .action(withCli(list));
}
