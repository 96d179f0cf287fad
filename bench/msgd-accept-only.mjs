// msgd as bin/msgd runs it (the bench passes bin/msgd's heap flags), but with the job loop
// stopped once it listens: the send benchmark measures how fast msgd accepts and durably stores
// messages apart from how fast it dispatches them, as the webhooks-in benchmark pauses processing.
// Env: MSGD_DATA_DIR, MSGD_PORT, MSGD_CONFIG as for msgd.
const { startServer } = await import(new URL('../dist/server.js', import.meta.url).href);
const server = await startServer({ env: { ...process.env, MSGD_DEMO: 'false' } });
await server.rt.worker.stop();
process.stdout.write('msgd listening (job loop stopped)\n');
process.on('SIGTERM', () => server.close().then(() => process.exit(0)));
