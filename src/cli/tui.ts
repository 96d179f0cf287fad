import type { Command } from 'commander';
import type { TuiDeps } from '../tui/deps.js';
import { parseExpiry } from './args.js';
import { actor, globalsOf, openCli, type Cli } from './context.js';
import { setExitCode } from './io.js';
import { EXIT_USAGE, describeError } from './errors.js';
import { webhookUrl } from './gateway.js';
import { examples } from './help.js';
import { VERSION } from '../lib/version.js';

// msgctl tui: the operator console. Ink and React are loaded here and only here (a dynamic
// import), so every other msgctl command starts as fast as before.

export const NO_TTY_MESSAGE = [
  'msgctl tui needs an interactive terminal (stdin and stdout a TTY).',
  'Without one, the same work is done by: msgctl partner create|list|show|suspend|activate|set-credit,',
  'msgctl token issue|revoke, msgctl balance topup|adjust, msgctl channel assign|unassign,',
  'msgctl gateway add|update|show, msgctl price set, msgctl webhooks log --follow,',
  'msgctl webhooks reprocess, msgctl messages list|show and msgctl jobs dead|retry.',
].join('\n');

/** The console's view of an opened data directory: msgctl's own functions, acting as tui:<user>. */
export function tuiDeps(cli: Cli): TuiDeps {
  const asTui: Cli = { ...cli, actor: actor(cli.io.env, 'tui') };
  return {
    ctx: cli.ctx,
    config: cli.config,
    actor: asTui.actor,
    version: VERSION,
    dataDir: cli.opened.where,
    describeError,
    parseExpiry,
    webhookUrl: (g) => webhookUrl(cli.config, g),
  };
}

export function registerTui(program: Command) {
  program
    .command('tui')
    .description('the operator console: partners, tokens, gateways, prices, money and the live webhook log')
    .addHelpText('after', examples('msgctl tui', 'msgctl --data-dir /var/lib/msgd tui'))
    .action(async (_opts: unknown, cmd: Command) => {
      const globals = globalsOf(cmd);
      const io = globals.io!;
      // The console draws on this process's own terminal: msgctl run with other streams has none.
      if (!(io.isTTY && io.stdout === process.stdout && process.stdout.isTTY && process.stdin.isTTY)) {
        io.stderr.write(`msgctl: ${NO_TTY_MESSAGE}\n`);
        setExitCode(cmd, EXIT_USAGE);
        return;
      }
      const cli = await openCli(globals);
      try {
        const { runTui } = await import('../tui/main.js');
        setExitCode(cmd, await runTui(tuiDeps(cli)));
      } finally {
        await cli.close();
      }
    });
}
