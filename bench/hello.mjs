// Baseline: Fastify hello-world POST with a JSON body, same framework and parser as msgd.
import Fastify from 'fastify';
const app = Fastify({ logger: false });
app.post('/hello', async (req) => ({ ok: true, got: req.body?.text?.length ?? 0 }));
await app.listen({ host: '127.0.0.1', port: Number(process.env.PORT) });
process.stdout.write('listening\n');
process.on('SIGTERM', () => app.close().then(() => process.exit(0)));
