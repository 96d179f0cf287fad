import type { FastifyPluginAsync } from 'fastify';
import type { Ui } from '../context.js';
import { channelRoutes } from './channels.js';
import { conversationRoutes } from './conversations.js';
import { ledgerRoutes } from './ledger.js';
import { messageRoutes } from './messages.js';
import { overviewRoutes } from './overview.js';
import { partnerRoutes } from './partners.js';
import { templateRoutes } from './templates.js';
import { suppressionRoutes } from './suppressions.js';
import { tokenRoutes } from './tokens.js';
import { userRoutes } from './users.js';
import { webhookRoutes } from './webhooks.js';

/** The signed-in pages, one module per resource. */
export const consoleRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  for (const routes of [
    overviewRoutes,
    messageRoutes,
    conversationRoutes,
    webhookRoutes,
    tokenRoutes,
    ledgerRoutes,
    channelRoutes,
    templateRoutes,
    userRoutes,
    partnerRoutes,
    suppressionRoutes,
  ])
    await app.register(routes, { ui });
};
