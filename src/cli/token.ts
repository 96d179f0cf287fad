import type { Command } from 'commander';
import { getPartner } from '../core/partners.js';
import {
  SCOPES,
  getTokenByRef,
  issueToken,
  parseScopes,
  listTokens,
  revokeToken,
  tokenJson,
  type Token,
} from '../core/tokens.js';
import { parseExpiry, usage } from './args.js';
import { confirm, YES_FLAG } from './confirm.js';
import { UsageError } from './errors.js';
import { withCli, type Cli } from './context.js';
import { examples } from './help.js';
import { kv, lines, table, when, type Result } from './output.js';

function details(t: Token, state: string): [string, string | null][] {
  return [
    ['id', t.id],
    ['name', t.name],
    ['prefix', t.prefix],
    ['scopes', t.scopes.split(' ').join(', ')],
    ['state', state],
    ['expires', t.expires_at === null ? 'never' : when(t.expires_at)],
  ];
}

async function issue(
  cli: Cli,
  partnerRef: string,
  opts: { name: string; scopes: string; expires?: string },
): Promise<Result> {
  const now = cli.ctx.now();
  const expiresAt = opts.expires === undefined ? null : usage(() => parseExpiry(opts.expires!, now));
  if (expiresAt !== null && expiresAt <= now)
    throw new UsageError(`the expiry must be in the future, got "${opts.expires}"`);
  const scopes = usage(() => parseScopes(opts.scopes));
  const { token, secret } = await issueToken(
    cli.ctx,
    { partner: partnerRef, name: opts.name, scopes, expiresAt },
    cli.actor,
  );
  const partner = await getPartner(cli.ctx, token.partner_id);
  const json = tokenJson(token, now);
  return {
    json: { ...json, partner: partner.slug, secret },
    text: lines(
      `Issued token "${token.name}" for ${partner.slug}.`,
      kv([...details(token, json.state), ['secret', secret]], '  '),
    ),
    // On stderr so `msgctl token issue ... > file` captures the secret, not the warning.
    notices: ['Store the secret now: it is not stored and will not be shown again.'],
  };
}

async function list(cli: Cli, partnerRef: string): Promise<Result> {
  const partner = await getPartner(cli.ctx, partnerRef);
  const now = cli.ctx.now();
  const rows = await listTokens(cli.ctx, partner.id);
  const text = rows.length
    ? table(
        ['id', 'name', 'prefix', 'scopes', 'state', 'expires', 'last used', 'created'],
        rows.map((t) => [
          t.id,
          t.name,
          t.prefix,
          t.scopes.split(' ').join(','),
          tokenJson(t, now).state,
          t.expires_at === null ? 'never' : when(t.expires_at),
          when(t.last_used_at),
          when(t.created_at),
        ]),
      )
    : `No tokens for ${partner.slug}. Issue one with: msgctl token issue ${partner.slug} --name <name> --scopes <scopes>`;
  return { json: { data: rows.map((t) => tokenJson(t, now)) }, text };
}

async function revoke(cli: Cli, ref: string, opts: { yes?: boolean }): Promise<Result> {
  const found = await getTokenByRef(cli.ctx, ref);
  if (!found.revoked_at) {
    const owner = (await getPartner(cli.ctx, found.partner_id)).slug;
    await confirm(
      cli.io,
      `Revoke token "${found.name}" of ${owner} (${found.id}, ${found.prefix}…): requests with it are refused from then on`,
      opts.yes,
    );
  }
  const t = await revokeToken(cli.ctx, found.id, cli.actor);
  const json = tokenJson(t, cli.ctx.now());
  return {
    json,
    text: lines(
      `Revoked token "${t.name}" (${t.id}): requests with it are refused from now on.`,
      kv(details(t, json.state), '  '),
    ),
  };
}

export function registerToken(program: Command) {
  const token = program.command('token').description('issue, list and revoke partner API tokens');

  token
    .command('issue')
    .description('issue a token; its secret is printed once and never stored')
    .argument('<partner>', 'slug or id')
    .requiredOption('--name <name>', 'what the token is for, e.g. prod')
    .requiredOption('--scopes <scopes>', `comma-separated: ${SCOPES.join(', ')}; or * for all`)
    .option('--expires <when>', 'ISO date (2027-01-31) or duration from now (30d, 12h, 90m, 2w); default never')
    .addHelpText(
      'after',
      examples(
        'msgctl token issue acme --name prod --scopes messages:send,messages:read',
        "msgctl token issue acme --name ci --scopes '*' --expires 30d",
        'msgctl token issue acme --name app --scopes messages:send --json | jq -r .secret',
      ),
    )
    .action(withCli(issue));

  token
    .command('list')
    .description("list a partner's tokens (never their secrets)")
    .argument('<partner>', 'slug or id')
    .addHelpText('after', examples('msgctl token list acme'))
    .action(withCli(list));

  token
    .command('revoke')
    .description('revoke a token by id or by its visible prefix')
    .argument('<token>', 'token id (tok_...) or prefix (msgd_live_xxxxxx)')
    .option(...YES_FLAG)
    .addHelpText(
      'after',
      examples('msgctl token revoke tok_01jd3k...', 'msgctl token revoke msgd_live_a1b2c3 --yes   # in a script'),
    )
    .action(withCli(revoke));
}
