import type { FastifyPluginAsync } from 'fastify';
import { partnerChannels } from '../../core/channel-health.js';
import type { Ui } from '../context.js';
import { When } from '../layout.js';
import { StatusText, pageCtx } from '../pages.js';

// Channels: what the operator assigned to this partner, with each one's health over the last
// minutes (the same figures as GET /v1/channels).

export const channelRoutes: FastifyPluginAsync<{ ui: Ui }> = async (app, { ui }) => {
  app.get('/channels', async (req, reply) => {
    const p = pageCtx(ui, req, reply, 'channels');
    const rows = await partnerChannels(ui.rt.ctx, p.user.partnerId);
    return p.render(
      'Channels',
      rows.length === 0 ? (
        <p>No channels are assigned yet. Your operator assigns them.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Channel</th>
              <th scope="col">Sender</th>
              <th scope="col">Provider</th>
              <th scope="col">Health</th>
              <th scope="col">Last {rows[0].recent.window_seconds / 60} minutes</th>
              <th scope="col">Assigned</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((c) => (
              <tr key={c.id}>
                <td>{c.type}</td>
                <td>{c.sender}</td>
                <td>{c.provider}</td>
                <td>
                  <StatusText status={c.health} />
                </td>
                <td>
                  {c.recent.accepted} accepted, {c.recent.failed} failed, {c.recent.retrying} retrying,{' '}
                  {c.recent.queued} queued
                </td>
                <td>
                  <When ms={Date.parse(c.created_at)} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ),
    );
  });
};
