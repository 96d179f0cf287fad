import { Command, CommanderError } from 'commander';
import { VERSION } from '../lib/version.js';
import { registerAudit } from './audit.js';
import { registerBackup } from './backup.js';
import { registerBalance } from './balance.js';
import { registerChannel } from './channel.js';
import { registerCompletion } from './completion.js';
import { registerDoctor } from './doctor.js';
import { EXIT_CODES_HELP, EXIT_USAGE, describeError, exitCodeFor, oneLine } from './errors.js';
import { registerGateway } from './gateway.js';
import { registerInit } from './init.js';
import { registerInstances } from './instances.js';
import { registerLedger } from './ledger.js';
import { registerMigrate } from './migrate.js';
import { registerPartner } from './partner.js';
import { registerPrice } from './price.js';
import { registerRestore } from './restore.js';
import { registerSandbox } from './sandbox.js';
import { registerStore } from './store.js';
import { registerSuppressions } from './suppressions.js';
import { registerToken } from './token.js';
import { registerUser } from './user.js';
import { registerTui } from './tui.js';
import { registerJobs } from './jobs.js';
import { registerMessages } from './messages.js';
import { registerWebhookLogCommands } from './webhooks-in.js';
import { registerWebhookOutCommands } from './webhooks-out.js';
import { titled } from './help.js';
import { bindIO, processIO, type CliIO } from './io.js';

export function buildProgram(): Command {
  const program = new Command('msgctl')
    .description('Operate a msgd data directory: partners, tokens, gateways, channels, prices and money.')
    .version(VERSION, '-V, --version')
    .option('--data-dir <dir>', 'the data directory (default: $MSGD_DATA_DIR, the config file, or ./data)')
    .option('--config <file>', 'config file (default: $MSGD_CONFIG)')
    .option(
      '--master-key-file <file>',
      'read the master key from this file, mode 0600 (default: $MSGD_MASTER_KEY_FILE, the config file, or <data dir>/master.key)',
    )
    .option(
      '--database-url <url>',
      'keep everything in this PostgreSQL database (postgres://…) instead of the data directory (default: $MSGD_DATABASE_URL or the config file)',
    )
    .option('--json', 'print only JSON on stdout (errors still go to stderr)')
    .addHelpText(
      'after',
      titled("An operator's first session", [
        'msgctl init',
        'msgctl partner create acme --name "Acme Ltd"',
        'msgctl token issue acme --name prod --scopes messages:send,messages:read',
        'echo "$AUTH_TOKEN" | msgctl gateway add twilio --name twilio-main --set account_sid=AC123 --secret-stdin auth_token',
        'msgctl channel assign acme twilio-main sms --from +15550001111',
        'msgctl price set sms 0.0075',
        'msgctl balance topup acme 100.00 --note "invoice 42"',
        'msgctl ledger list acme',
      ]) +
        `\nPartners and gateways are named by slug/name or id. Money is a decimal string (12.50).\n${EXIT_CODES_HELP}\nMSGD_DEBUG=1 prints stack traces.\n`,
    );

  registerInit(program);
  registerMigrate(program);
  registerPartner(program);
  registerToken(program);
  registerUser(program);
  registerGateway(program);
  registerChannel(program);
  registerPrice(program);
  registerBalance(program);
  registerLedger(program);
  registerAudit(program);
  registerMessages(program);
  registerSuppressions(program);
  registerJobs(program);
  const webhooks = program
    .command('webhooks')
    .description('provider webhooks in (log) and partner webhooks out (deliveries, replay)');
  registerWebhookLogCommands(webhooks);
  registerWebhookOutCommands(webhooks);
  registerDoctor(program);
  registerInstances(program);
  registerBackup(program);
  registerRestore(program);
  registerStore(program);
  registerSandbox(program);
  registerTui(program);
  registerCompletion(program);

  configureTree(program);
  return program;
}

function fullName(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

// Settings commander does not inherit into already-created subcommands: apply them to all.
function configureTree(cmd: Command) {
  cmd
    .exitOverride()
    .showSuggestionAfterError(true)
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false })
    .configureOutput({
      // One line on stderr, like every other msgctl error, pointing at the right --help.
      outputError: (str, write) =>
        write(`msgctl: ${oneLine(str.replace(/^error:\s*/, ''))} (see "${fullName(cmd)} --help")\n`),
    });
  for (const sub of cmd.commands) configureTree(sub);
}

/** msgctl with `argv` as process.argv has it (node, script, args...); resolves to the exit code. */
export async function run(argv: string[], io: CliIO = processIO()): Promise<number> {
  const program = buildProgram();
  const state = bindIO(program, io);
  try {
    await program.parseAsync(argv);
    // Run as the process itself, a command may also have set process.exitCode directly.
    if (state.exitCode === 0 && io.stdout === process.stdout && typeof process.exitCode === 'number')
      return process.exitCode;
    return state.exitCode;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version') return 0;
      // A group run without a subcommand printed its help; anything else printed its one line.
      return EXIT_USAGE;
    }
    io.stderr.write(`msgctl: ${describeError(e)}\n`);
    if (io.env.MSGD_DEBUG === '1' && e instanceof Error && e.stack) io.stderr.write(e.stack + '\n');
    return exitCodeFor(e);
  }
}
