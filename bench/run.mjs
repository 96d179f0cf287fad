// npm run bench: every benchmark in one run on this machine, printing figures and ratios.
// Run after `npm ci && npm run build` (the benchmarks run dist/). BENCH_SECONDS shortens or lengthens load phases;
// BENCH_ONLY=send,webhooks-in,v1,v1-messages,scheduled,backup,metrics,ui,tui picks suites; BENCH_BACKUP_MESSAGES sizes
// the backup's store, BENCH_UI_MESSAGES the console's, BENCH_MESSAGES the message list's,
// BENCH_TUI_MESSAGES and BENCH_TUI_WEBHOOKS msgctl tui's, BENCH_SUPPRESSIONS the suppression list beside
// the send bench (alternating pairs without and with it), BENCH_SCHEDULED the scheduled burst.
import { existsSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const only = process.env.BENCH_ONLY?.split(',');
const print = (line) => process.stdout.write(line + '\n');

print(
  `msgd benchmarks: node ${process.version}, ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${Math.round(totalmem() / 2 ** 30)} GiB`,
);
print('');
const suites = [
  ['send', './send.mjs', 'Send API and dispatch'],
  ['webhooks-in', './webhooks-in.mjs', 'Provider webhooks in'],
  ['v1', './v1.mjs', 'Resource API and webhooks out'],
  ['v1-messages', './v1-messages.mjs', 'Resource API: the message list'],
  ['scheduled', './scheduled.mjs', 'Scheduled sends: a same-second burst, the scheduled list, accept'],
  ['backup', './backup.mjs', 'Backup under send load'],
  ['metrics', './metrics.mjs', 'Metrics: send-path overhead and scrape time'],
  ['ui', './ui.mjs', 'Web console pages'],
  ['tui', './tui.mjs', 'The operator console (msgctl tui) beside the send API'],
];
let failed = false;
for (const [name, file, title] of suites) {
  if (only && !only.includes(name)) continue;
  if (!existsSync(new URL(file, import.meta.url))) continue;
  print(`== ${title} ==`);
  try {
    const mod = await import(file);
    await mod.run({ print, seconds });
  } catch (e) {
    failed = true;
    print(`  ${name} failed: ${e?.stack ?? e}`);
  }
  print('');
}
process.exit(failed ? 1 : 0);
