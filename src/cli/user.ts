import type { Command } from 'commander';
import type { Config } from '../config/schema.js';
import { getPartner } from '../core/partners.js';
import { resetTwoFactor } from '../core/two-factor.js';
import {
  ROLES,
  getMember,
  inviteUser,
  listMembers,
  memberJson,
  memberState,
  otherPartners,
  removeUser,
  resetUser,
  setUserStatus,
  type IssuedLink,
} from '../core/users.js';
import { confirm, YES_FLAG } from './confirm.js';
import { withCli, type Cli } from './context.js';
import { examples } from './help.js';
import { kv, lines, table, when, type Result } from './output.js';

// msgctl user: a partner's web console users (people with a membership and a role in it). The
// operator invites a partner's first admin; that admin invites the rest from the console.

/** Where a link points: server.publicUrl, else the configured host and port (with a warning). */
export function consoleBase(config: Config): { base: string; warning: string | null } {
  if (config.server.publicUrl) return { base: config.server.publicUrl.replace(/\/+$/, ''), warning: null };
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  return {
    base: `http://${host}:${config.server.port}`,
    warning:
      'server.publicUrl is not set: the link uses the listening address, which a browser elsewhere may not reach. Set server.publicUrl (MSGD_PUBLIC_URL).',
  };
}

async function linkResult(cli: Cli, issued: IssuedLink, verb: string): Promise<Result> {
  const { base, warning } = consoleBase(cli.config);
  const url = `${base}/ui/invite/${issued.secret}`;
  const { member, partner } = issued;
  const others = await otherPartners(cli.ctx, member.user_id, partner.id);
  return {
    json: {
      ...memberJson(member),
      partner: partner.slug,
      link: url,
      link_kind: issued.kind,
      link_expires_at: new Date(issued.expiresAt).toISOString(),
    },
    text: lines(
      `${verb} ${member.email} (${member.role}) for ${partner.slug}.`,
      kv(
        [
          ['link', url],
          ['expires', when(issued.expiresAt)],
        ],
        '  ',
      ),
    ),
    notices: [
      issued.kind === 'join'
        ? 'The link works once and is not shown again: send it to the user now. They log in with their password to accept; it sets no password.'
        : 'The link works once and is not shown again: send it to the user now.',
      ...(issued.kind === 'reset' && others
        ? [`${member.email} also belongs to ${others} other partner(s): the new password opens those too.`]
        : []),
      ...(warning ? [`warning: ${warning}`] : []),
    ],
  };
}

async function invite(cli: Cli, partnerRef: string, email: string, opts: { role: string }): Promise<Result> {
  return linkResult(
    cli,
    await inviteUser(cli.ctx, { partner: partnerRef, email, role: opts.role }, cli.actor),
    'Invited',
  );
}

async function list(cli: Cli, partnerRef: string): Promise<Result> {
  const partner = await getPartner(cli.ctx, partnerRef);
  const rows = await listMembers(cli.ctx, partner.id);
  return {
    json: { data: rows.map(memberJson) },
    text: rows.length
      ? table(
          ['id', 'email', 'role', 'state', '2fa', 'last login', 'created'],
          rows.map((u) => [
            u.user_id,
            u.email,
            u.role,
            memberState(u),
            u.two_factor ? 'on' : 'off',
            when(u.last_login_at),
            when(u.created_at),
          ]),
        )
      : `No console users for ${partner.slug}. Invite one with: msgctl user invite ${partner.slug} <email> --role admin`,
  };
}

async function disable(cli: Cli, partnerRef: string, ref: string): Promise<Result> {
  const partner = await getPartner(cli.ctx, partnerRef);
  const u = await setUserStatus(cli.ctx, partner.id, ref, 'disabled', cli.actor);
  return {
    json: memberJson(u),
    text: `Disabled ${u.email} for ${partner.slug}: their sessions there have ended and they cannot open it.`,
  };
}

async function enable(cli: Cli, partnerRef: string, ref: string): Promise<Result> {
  const partner = await getPartner(cli.ctx, partnerRef);
  const u = await setUserStatus(cli.ctx, partner.id, ref, 'active', cli.actor);
  return { json: memberJson(u), text: `Enabled ${u.email} for ${partner.slug}.` };
}

async function reset(cli: Cli, partnerRef: string, ref: string): Promise<Result> {
  const partner = await getPartner(cli.ctx, partnerRef);
  return linkResult(cli, await resetUser(cli.ctx, partner.id, ref, cli.actor, 'operator'), 'Reset link for');
}

async function remove(cli: Cli, partnerRef: string, ref: string, opts: { yes?: boolean }): Promise<Result> {
  const partner = await getPartner(cli.ctx, partnerRef);
  const member = await getMember(cli.ctx, partner.id, ref);
  await confirm(
    cli.io,
    `Remove ${member.email} (${member.user_id}, ${member.role}) from ${partner.slug}, ending their sessions there`,
    opts.yes,
  );
  await removeUser(cli.ctx, partner.id, member.user_id, cli.actor);
  return {
    json: { ...memberJson(member), partner: partner.slug, removed: true },
    text: `Removed ${member.email} from ${partner.slug}.`,
  };
}

async function resetTwoFactorCmd(cli: Cli, partnerRef: string, ref: string, opts: { yes?: boolean }): Promise<Result> {
  const partner = await getPartner(cli.ctx, partnerRef);
  const found = await getMember(cli.ctx, partner.id, ref);
  await confirm(
    cli.io,
    `Reset two-factor authentication of ${found.email} (${found.user_id}) for ${partner.slug}: their authenticator and recovery codes stop working and their sessions end`,
    opts.yes,
  );
  const u = await resetTwoFactor(cli.ctx, partner.id, found.user_id, cli.actor);
  return {
    json: memberJson(u),
    text: `Reset two-factor authentication of ${u.email}: they log in with their password alone${
      partner.require_2fa ? ' and set it up again at once (their partner requires it)' : ''
    }.`,
  };
}

export function registerUser(program: Command) {
  const user = program
    .command('user')
    .description("a partner's web console users: invite, list, disable, enable, reset, remove, reset-2fa");

  user
    .command('invite')
    .description(
      'invite a person to the partner with a role; prints a one-time link (to set a password, or, for a person who has one, to log in and accept)',
    )
    .argument('<partner>', 'slug or id')
    .argument('<email>', "the user's email address (their login)")
    .requiredOption('--role <role>', `one of ${ROLES.join(', ')}`)
    .addHelpText('after', examples('msgctl user invite acme ann@acme.example --role admin'))
    .action(withCli(invite));

  user
    .command('list')
    .description("list a partner's console users")
    .argument('<partner>', 'slug or id')
    .addHelpText('after', examples('msgctl user list acme'))
    .action(withCli(list));

  user
    .command('disable')
    .description("disable a user's membership: ends their sessions in this partner at once")
    .argument('<partner>', 'slug or id')
    .argument('<user>', 'email or user id (usr_...)')
    .addHelpText('after', examples('msgctl user disable acme ann@acme.example'))
    .action(withCli(disable));

  user
    .command('enable')
    .description("enable a disabled user's membership again")
    .argument('<partner>', 'slug or id')
    .argument('<user>', 'email or user id (usr_...)')
    .action(withCli(enable));

  user
    .command('reset')
    .description(
      'print a one-time link to set a new password (the current one works until it is used); for an invitation not yet accepted, a new invitation link',
    )
    .argument('<partner>', 'slug or id')
    .argument('<user>', 'email or user id (usr_...)')
    .addHelpText('after', examples('msgctl user reset acme ann@acme.example'))
    .action(withCli(reset));

  user
    .command('remove')
    .description("end a user's membership of the partner; a person left in no partner is deleted")
    .argument('<partner>', 'slug or id')
    .argument('<user>', 'email or user id (usr_...)')
    .option(...YES_FLAG)
    .addHelpText(
      'after',
      examples(
        'msgctl user remove acme ann@acme.example',
        'msgctl user remove acme usr_01jd3k... --yes   # in a script',
      ),
    )
    .action(withCli(remove));

  user
    .command('reset-2fa')
    .description("turn off a user's two-factor authentication (lost phone and recovery codes); ends their sessions")
    .argument('<partner>', 'slug or id')
    .argument('<user>', 'email or user id (usr_...)')
    .option(...YES_FLAG)
    .addHelpText(
      'after',
      examples(
        'msgctl user reset-2fa acme ann@acme.example',
        'msgctl user reset-2fa acme usr_01jd3k... --yes   # in a script',
      ),
    )
    .action(withCli(resetTwoFactorCmd));
}
