import type { FastifyPluginAsync } from 'fastify';
import type { Runtime } from '../../runtime.js';

export const healthRoutes: FastifyPluginAsync<{ rt: Runtime }> = async (app, { rt }) => {
  app.get('/healthz', async (_req, reply) => {
    // A cheap query proves the database answers, not only the process.
    rt.ctx.db.sqlite.prepare('SELECT 1').get();
    return reply.send({ status: 'ok', version: rt.version, uptime_s: Math.round(process.uptime()) });
  });
};
