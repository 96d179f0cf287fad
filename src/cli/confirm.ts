import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import { AppError } from '../lib/errors.js';
import { UsageError } from './errors.js';
import type { CliIO } from './io.js';

// Commands that lose data or cannot be undone ask first. A person at a terminal is asked
// (on stderr, so stdout stays data); a script has no one to ask and must say --yes, so a
// command pasted into a cron job never deletes by surprise.

/** Whether there is a person to ask: stdin is a terminal and this is not CI. */
export function canAsk(io: CliIO): boolean {
  const ci = io.env.CI;
  return io.isTTY && (ci === undefined || ci === '' || ci === 'false');
}

/** One line typed on stdin ('' at its end). */
async function readLine(stdin: CliIO['stdin']): Promise<string> {
  if (stdin instanceof Readable) {
    // readline stops at the line and leaves the rest of stdin readable (--secret-stdin after).
    const rl = createInterface({ input: stdin, terminal: false });
    try {
      return await new Promise<string>((resolve) => {
        rl.once('line', resolve);
        rl.once('close', () => resolve(''));
      });
    } finally {
      rl.close();
    }
  }
  let text = '';
  for await (const chunk of stdin) {
    text += chunk.toString();
    const nl = text.indexOf('\n');
    if (nl >= 0) return text.slice(0, nl);
  }
  return text;
}

/**
 * Go on only with --yes or a "y" typed at the terminal. `what` names the exact object and
 * says what is lost ("Remove gateway twilio-old (gw_…) and its stored secrets").
 */
export async function confirm(io: CliIO, what: string, yes: boolean | undefined): Promise<void> {
  if (yes) return;
  if (!canAsk(io))
    throw new UsageError(`${what}: this cannot be undone; add --yes to confirm (there is no terminal to ask on)`);
  io.stderr.write(`${what}? This cannot be undone. [y/N] `);
  const answer = await readLine(io.stdin);
  if (!/^\s*y(es)?\s*$/i.test(answer)) throw new AppError('aborted', 'not confirmed: nothing was changed');
}

/** The --yes option every such command takes. */
export const YES_FLAG = ['-y, --yes', 'do it without asking (needed when not at a terminal)'] as const;
