import { render } from 'ink';
import { App } from './app.js';
import type { TuiDeps } from './deps.js';
import { asciiStream, utf8Locale } from './terminal.js';
import { colorWanted } from './theme.js';

// The console's life in a terminal: the alternate screen and bracketed paste on the way in,
// and the terminal as it was (main screen, cursor shown, paste brackets off, cooked mode) on
// every way out: q, Ctrl-C, a signal, or a crash anywhere. A signal ends it with 128 + the
// signal's number (SIGHUP 129, SIGINT 130, SIGTERM 143), as shells and supervisors expect.

const ENTER = '\x1b[?1049h\x1b[H\x1b[2J\x1b[?2004h';
const LEAVE = '\x1b[?2004l\x1b[?25h\x1b[?1049l';

const SIGNAL_EXIT = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 } as const;

export async function runTui(
  deps: TuiDeps,
  io: { stdin?: NodeJS.ReadStream; stdout?: NodeJS.WriteStream; env?: NodeJS.ProcessEnv } = {},
): Promise<number> {
  const env = io.env ?? process.env;
  const stdin = io.stdin ?? process.stdin;
  const terminal = io.stdout ?? process.stdout;
  const stdout = utf8Locale(env) ? terminal : asciiStream(terminal);
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    try {
      if (stdin.isTTY) stdin.setRawMode(false);
    } catch {
      // The terminal is gone (SSH dropped): nothing left to restore.
    }
    try {
      terminal.write(LEAVE);
    } catch {
      // Nowhere to write to.
    }
  };
  terminal.write(ENTER);
  let instance: ReturnType<typeof render> | undefined;
  let exitCode = 0;
  const crash = (e: unknown) => {
    instance?.unmount();
    restore();
    process.stderr.write(`msgctl tui: ${deps.describeError(e)}\n`);
    if (process.env.MSGD_DEBUG === '1' && e instanceof Error && e.stack) process.stderr.write(e.stack + '\n');
    process.exit(1);
  };
  const stops = Object.fromEntries(
    Object.entries(SIGNAL_EXIT).map(([sig, code]) => [
      sig,
      () => {
        exitCode = code;
        instance?.unmount();
      },
    ]),
  ) as Record<keyof typeof SIGNAL_EXIT, () => void>;
  process.on('exit', restore);
  process.on('uncaughtException', crash);
  process.on('unhandledRejection', crash);
  for (const [sig, fn] of Object.entries(stops)) process.on(sig, fn);
  instance = render(<App deps={deps} color={colorWanted(env, terminal)} />, {
    stdin,
    stdout,
    exitOnCtrlC: false,
    patchConsole: true,
    maxFps: 10,
  });
  try {
    await instance.waitUntilExit();
    return exitCode;
  } finally {
    restore();
    process.off('exit', restore);
    process.off('uncaughtException', crash);
    process.off('unhandledRejection', crash);
    for (const [sig, fn] of Object.entries(stops)) process.off(sig, fn);
  }
}
