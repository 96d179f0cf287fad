import { run } from './program.js';

// Exit through exitCode, not process.exit(), so piped stdout is flushed completely.
process.exitCode = await run(process.argv);
