import { run } from './program.js';

// `msgctl audit list | head` closes the pipe early: that is the reader's choice, not a crash.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw e;
});

// Exit through exitCode, not process.exit(), so piped stdout is flushed completely.
process.exitCode = await run(process.argv);
