import type { FastifyPluginAsync } from 'fastify';
import { sql } from '../../db/sql.js';
import type { StorageHealth } from '../../db/storage.js';
import type { HttpDeps } from '../deps.js';
import { sendError } from '../../web/errors.js';

// /healthz: the process is alive and answers (for a supervisor's liveness check; never
// restarts msgd over a full disk). /readyz: msgd can keep what it accepts (for a load
// balancer or an alert): the database takes a write, migrations are current, the disk has room.

export const healthRoutes: FastifyPluginAsync<{ rt: HttpDeps; storage: StorageHealth }> = async (
  app,
  { rt, storage },
) => {
  app.get('/healthz', async (_req, reply) => {
    // A read proves SQLite's file answers; it reads even from a full disk. PostgreSQL is not
    // asked: msgd reconnects to it by itself, and a restart would not bring it back (/readyz
    // says whether it answers).
    if (rt.ctx.store.dialect === 'sqlite') await rt.ctx.store.get(sql`SELECT 1 AS ok`);
    return reply.send({ status: 'ok', version: rt.version, uptime_s: Math.round(process.uptime()) });
  });

  app.get('/readyz', (_req, reply) => {
    const r = storage.readiness();
    const checks = Object.fromEntries(r.checks.map((c) => [c.name, { ok: c.ok, message: c.message }]));
    if (r.ok) return reply.send({ status: 'ready', checks });
    reply.header('retry-after', '30');
    return sendError(
      reply,
      'not_ready',
      `msgd cannot keep what it accepts right now: ${r.checks
        .filter((c) => !c.ok)
        .map((c) => c.message)
        .join('; ')}`,
      r.checks.filter((c) => !c.ok).map((c) => ({ field: c.name, message: c.message })),
    );
  });
};
