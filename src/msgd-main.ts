import { writeSync } from 'node:fs';
import { Command, Option } from 'commander';
import { ConfigError, loadConfig } from './config/load.js';
import { DataDirError } from './db/datadir.js';
import { SchemaTooNewError } from './db/migrate.js';
import { startServer } from './server.js';
import { VERSION } from './lib/version.js';

// bin/msgd: the server. `msgd` and `msgd serve` are the same thing.

function fail(message: string): never {
  writeStderr(`msgd: ${message}\n`);
  process.exit(1);
}

/** Straight to the descriptor: a broken stderr must not throw or emit an unhandled 'error'. */
function writeStderr(text: string) {
  try {
    writeSync(2, text);
  } catch {
    // Nowhere left to say it.
  }
}

// A broken stdout or stderr (a full disk, a closed pipe) must not kill msgd with an unhandled
// 'error' from a console write; msgd's logs have their own destination (src/lib/log-sink.ts).
process.stdout.on('error', () => {});
process.stderr.on('error', () => {});

async function serve(opts: {
  config?: string;
  dataDir?: string;
  masterKeyFile?: string;
  databaseUrl?: string;
  host?: string;
  port?: string;
  demo?: boolean;
}) {
  let config;
  try {
    const overrides: Record<string, unknown> = {};
    if (opts.host) overrides['server.host'] = opts.host;
    if (opts.port !== undefined) {
      if (!/^\d+$/.test(opts.port)) fail(`--port: expected a port number, got "${opts.port}"`);
      overrides['server.port'] = Number(opts.port);
    }
    if (opts.demo === false) overrides['demo.enabled'] = false;
    config = loadConfig({
      configPath: opts.config,
      dataDir: opts.dataDir,
      masterKeyFile: opts.masterKeyFile,
      databaseUrl: opts.databaseUrl,
      overrides,
    });
  } catch (e) {
    if (e instanceof ConfigError) fail(e.message);
    throw e;
  }
  // Signal handlers before anything starts: until one is installed, a SIGTERM kills the process
  // outright (the default action), and a supervisor may send one as soon as it sees the
  // listening line. One that arrives while msgd is starting stops it once it has started.
  let early: string | null = null;
  let onSignal = (signal: string) => {
    early ??= signal;
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  let server;
  try {
    server = await startServer({ config, configPath: opts.config });
  } catch (e: any) {
    if (e instanceof DataDirError || e instanceof SchemaTooNewError || e instanceof ConfigError) fail(e.message);
    if (e?.code === 'EADDRINUSE')
      fail(`port ${config.server.port} on ${config.server.host} is already in use (set MSGD_PORT or --port)`);
    if (e?.code === 'EACCES' && e.syscall === 'listen')
      fail(`not allowed to listen on ${config.server.host}:${config.server.port}`);
    // Anything else refused by the file system is the data directory msgd could not write to.
    if (['SQLITE_CANTOPEN', 'SQLITE_READONLY', 'EACCES', 'EPERM', 'EROFS'].includes(e?.code)) {
      const what = e.path ? ` (${e.code} on ${e.path})` : ` (${e.message})`;
      fail(`cannot use the data directory ${config.dataDir}: msgd needs to read and write it${what}`);
    }
    fail(e?.message ?? String(e));
  }
  const exit = (code: number, message?: string) => {
    server.logSink?.flushSync();
    if (message) writeStderr(message);
    process.exit(code);
  };
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) exit(1, `msgd: ${signal} again, exiting now\n`);
    stopping = true;
    server.rt.logger.info({ signal }, 'signal received');
    // The bound on the whole shutdown: whatever still waits (a slow client, a provider that
    // does not answer, a stuck delivery) is abandoned; jobs left running are taken back and
    // resent at the next start, as after a crash.
    const limit = config.server.shutdownTimeoutMs;
    setTimeout(
      () => exit(1, `msgd: shutdown took longer than server.shutdownTimeoutMs (${limit} ms): exiting now\n`),
      limit,
    ).unref();
    server.close().then(
      async () => {
        await server.logSink?.flushBeforeExit();
        exit(0);
      },
      async (e) => {
        await server.logSink?.flushBeforeExit();
        exit(1, `msgd: shutdown failed: ${e?.message ?? e}\n`);
      },
    );
  };
  onSignal = stop;
  if (early) stop(early);
}

const program = new Command('msgd')
  .description('msgd: the messaging gateway server (HTTP API, job loop and cron in one process)')
  .version(VERSION);

const serveOptions = (cmd: Command) =>
  cmd
    .option('-c, --config <file>', 'JSON config file (default: $MSGD_CONFIG; see config/msgd.example.json)')
    .option('-d, --data-dir <dir>', 'data directory (default: $MSGD_DATA_DIR or ./data)')
    .option(
      '--master-key-file <file>',
      'read the master key from this file, mode 0600 (default: $MSGD_MASTER_KEY_FILE, the config file, or <data dir>/master.key)',
    )
    .option(
      '--database-url <url>',
      'keep everything in this PostgreSQL database (postgres://…) instead of the data directory (default: $MSGD_DATABASE_URL)',
    )
    .option('--host <host>', 'listen address (default: config server.host, 127.0.0.1)')
    .option('-p, --port <port>', 'listen port (default: config server.port, 8080)')
    .addOption(new Option('--no-demo', 'never create the demo partner on an empty data directory'));

serveOptions(
  program.command('serve', { isDefault: true }).description('start the server (the default command)'),
).action(serve);

program.addHelpText(
  'after',
  `
Serve options (msgd [serve] [options]):
  -c, --config <file>    JSON config file (default: $MSGD_CONFIG; see config/msgd.example.json)
  -d, --data-dir <dir>   data directory (default: $MSGD_DATA_DIR or ./data)
  --master-key-file <file>
                         read the master key from this file, mode 0600 (default: $MSGD_MASTER_KEY_FILE,
                         the config file, or <data dir>/master.key; MSGD_MASTER_KEY as well is refused)
  --database-url <url>   keep everything in this PostgreSQL database (postgres://…) instead of the
                         data directory (default: $MSGD_DATABASE_URL, the config file's database.url)
  --host <host>          listen address (default 127.0.0.1)
  -p, --port <port>      listen port (default 8080)
  --no-demo              never create the demo partner on an empty data directory

Environment: MSGD_CONFIG, MSGD_DATA_DIR, MSGD_DATABASE_URL, MSGD_HOST, MSGD_PORT, MSGD_PUBLIC_URL, MSGD_MASTER_KEY,
MSGD_MASTER_KEY_FILE, MSGD_LOG_LEVEL, MSGD_ACCESS_LOG, MSGD_METRICS_PORT, MSGD_METRICS_TOKEN, MSGD_DEMO
(see docs/configuration.md).
Operator commands are in msgctl (msgctl --help).`,
);

program.parseAsync(process.argv).catch((e) => fail(e?.message ?? String(e)));
