// Stand-in for bin/msgctl until src/cli/program.ts registers `webhooks log`: the same global
// options, the same command function, run from the compiled dist/ like bin/msgctl.
import { Command } from 'commander';

const { registerWebhookLogCommands } = await import(new URL('../../dist/cli/webhooks-in.js', import.meta.url).href);
const program = new Command('msgctl')
  .option('--data-dir <dir>')
  .option('--config <file>')
  .option('--json')
  .exitOverride();
registerWebhookLogCommands(program.command('webhooks'));
try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (!String(e.code ?? '').startsWith('commander.')) process.stderr.write(`msgctl: ${e.message}\n`);
  process.exitCode = e.name === 'UsageError' || String(e.code ?? '').startsWith('commander.') ? 2 : 1;
}
