import { render } from 'ink';
import { App } from './app.js';
import type { TuiDeps } from './deps.js';
import { colorWanted } from './theme.js';

// The console's life in a terminal: the alternate screen on the way in, and the terminal as
// it was (main screen, cursor shown, cooked mode) on every way out: q, Ctrl-C, a signal, or a
// crash anywhere.

const ENTER = '\x1b[?1049h\x1b[H\x1b[2J';
const LEAVE = '\x1b[?25h\x1b[?1049l';

export async function runTui(
  deps: TuiDeps,
  io: { stdin?: NodeJS.ReadStream; stdout?: NodeJS.WriteStream } = {},
): Promise<number> {
  const stdin = io.stdin ?? process.stdin;
  const stdout = io.stdout ?? process.stdout;
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    try {
      if (stdin.isTTY) stdin.setRawMode(false);
    } catch {
      // The terminal is gone (SSH dropped): nothing left to restore.
    }
    stdout.write(LEAVE);
  };
  stdout.write(ENTER);
  let instance: ReturnType<typeof render> | undefined;
  const crash = (e: unknown) => {
    instance?.unmount();
    restore();
    process.stderr.write(`msgctl tui: ${deps.describeError(e)}\n`);
    if (process.env.MSGD_DEBUG === '1' && e instanceof Error && e.stack) process.stderr.write(e.stack + '\n');
    process.exit(1);
  };
  const stop = () => instance?.unmount();
  process.on('exit', restore);
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);
  process.on('SIGTERM', stop);
  process.on('SIGHUP', stop);
  process.on('SIGINT', stop);
  instance = render(<App deps={deps} color={colorWanted(process.env, stdout)} />, {
    stdin,
    stdout,
    exitOnCtrlC: false,
    patchConsole: true,
    maxFps: 10,
  });
  try {
    await instance.waitUntilExit();
    return 0;
  } finally {
    restore();
    process.off('exit', restore);
    process.off('uncaughtException', crash);
    process.off('unhandledRejection', crash);
    process.off('SIGTERM', stop);
    process.off('SIGHUP', stop);
    process.off('SIGINT', stop);
  }
}
