import type { Command } from 'commander';

// What msgctl takes from the world it runs in. `run(argv, io)` is given it explicitly, so
// tests (and anything embedding msgctl) can run it in-process with their own streams and
// environment; the binary passes the process's own.

export interface CliWritable {
  write(chunk: string): unknown;
}

export interface CliIO {
  stdout: CliWritable;
  stderr: CliWritable;
  /** Read only by commands told to (--secret-stdin); never touched otherwise. */
  stdin: AsyncIterable<Buffer | string>;
  env: NodeJS.ProcessEnv;
  /** stdin is a terminal: a person may be typing, so prompts are worth showing. */
  isTTY: boolean;
  /** Ends long-running commands (webhooks log --follow); the binary aborts it on Ctrl-C. */
  signal?: AbortSignal;
}

/** The IO of this process: its streams, environment and terminal, and Ctrl-C as the signal. */
export function processIO(): CliIO {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    isTTY: !!process.stdin.isTTY,
  };
}

interface Run {
  io: CliIO;
  exitCode: number;
}

// Keyed by the root command of one run, so concurrent in-process runs never share state.
const runs = new WeakMap<Command, Run>();

function rootOf(cmd: Command): Command {
  let c = cmd;
  while (c.parent) c = c.parent;
  return c;
}

/** Tie a program to its IO: commander's own help and errors are written to it too. */
export function bindIO(program: Command, io: CliIO): Run {
  const run: Run = { io, exitCode: 0 };
  runs.set(program, run);
  if (io.stdout !== process.stdout || io.stderr !== process.stderr) {
    const output = {
      writeOut: (s: string) => void io.stdout.write(s),
      writeErr: (s: string) => void io.stderr.write(s),
      // Not a terminal: no colours, and help wrapped at commander's default width.
      getOutHelpWidth: () => 80,
      getErrHelpWidth: () => 80,
      getOutHasColors: () => false,
      getErrHasColors: () => false,
    };
    const apply = (cmd: Command) => {
      cmd.configureOutput(output);
      for (const sub of cmd.commands) apply(sub);
    };
    apply(program);
  }
  return run;
}

/** The IO of the run a command belongs to (the process's when it was built without `run`). */
export function ioOf(cmd: Command): CliIO {
  return runs.get(rootOf(cmd))?.io ?? processIO();
}

/** Record the exit code of a command that completed (1 when its result says it failed). */
export function setExitCode(cmd: Command, code: number) {
  const run = runs.get(rootOf(cmd));
  if (run) run.exitCode = code;
  else process.exitCode = code;
}
