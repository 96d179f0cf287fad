import { afterEach, describe, expect, it } from 'vitest';
import { auditIn } from '../../src/core/audit.js';
import { pruneLoginAudit, redactOldContent } from '../../src/core/retention.js';
import { sql } from '../../src/db/sql.js';
import { builtinTasks, maintenanceKind } from '../../src/jobs/maintenance.js';
import { connect, outboundSms, serverStore, setupPartner } from '../helpers/server.js';
import { openStoreCtx, type StoreCtx, testStore } from './helpers.js';

// Message content after retention.messageContentDays, on both stores: gone from the row, while
// the row's metadata, its status history and the ledger stay exactly as they were.

const DAY = 86_400_000;
let t: StoreCtx;
afterEach(() => t?.close());

async function scene(count: number) {
  t = await openStoreCtx({ clock: true });
  const p = await setupPartner(t.ctx, { balance: '1000' });
  const { gateway, channel } = await connect(t.ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550001111');
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    ids.push(
      (
        await outboundSms(
          t.ctx,
          p.partnerId,
          { id: channel.id, gateway_id: gateway.id, sender: '+15550001111' },
          { text: `personal ${i}` },
        )
      ).id,
    );
  }
  return { ids, p };
}

const settle = async (ids: string[], status = 'delivered') => {
  for (const id of ids) {
    await t.ctx.store.run(sql`UPDATE messages SET status = ${status} WHERE id = ${id}`);
    await t.ctx.store.run(
      sql`INSERT INTO message_status_history (message_id, status, occurred_at, created_at) VALUES (${id}, ${status}, 1, 1)`,
    );
  }
};
const content = async (id: string) =>
  JSON.parse((await t.ctx.store.get<{ content: string }>(sql`SELECT content FROM messages WHERE id = ${id}`))!.content);
const rows = (text: string) => t.ctx.store.all(sql.raw(text));
const noPause = async () => {};

describe('message content retention', () => {
  it('redacts the content of settled messages older than the limit, keeping metadata, history and ledger', async () => {
    const { ids } = await scene(7);
    await settle(ids);
    const before = {
      messages: (await rows(`SELECT * FROM messages ORDER BY id`)) as Record<string, unknown>[],
      history: await rows(`SELECT * FROM message_status_history ORDER BY id`),
      ledger: await rows(`SELECT * FROM ledger_entries ORDER BY id`),
    };
    // 29 days later nothing is old enough; 31 days later all are.
    t.clock.now = Date.now() + 29 * DAY;
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 0, held: 0 });
    expect(await content(ids[0])).toEqual({ kind: 'text', text: 'personal 0' });
    t.clock.now = Date.now() + 31 * DAY;
    expect(await redactOldContent(t.ctx, 30, { batch: 3, pause: noPause })).toEqual({ redacted: 7, held: 0 });
    for (const id of ids) {
      expect(await content(id)).toEqual({
        kind: 'redacted',
        was: 'text',
        redacted_at: new Date(t.clock.now).toISOString(),
      });
    }
    const after = (await rows(`SELECT * FROM messages ORDER BY id`)) as Record<string, unknown>[];
    expect(after.map(({ content: _c, ...rest }) => rest)).toEqual(
      before.messages.map(({ content: _c, ...rest }) => rest),
    );
    expect(await rows(`SELECT * FROM message_status_history ORDER BY id`)).toEqual(before.history);
    expect(await rows(`SELECT * FROM ledger_entries ORDER BY id`)).toEqual(before.ledger);
    expect(JSON.stringify(await rows(`SELECT * FROM messages`))).not.toContain('personal');
    // A second run finds nothing left to do.
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 0, held: 0 });
  });

  it('redacts only what is older than the limit', async () => {
    const { ids: old } = await scene(3);
    await settle(old);
    const boundary = Date.now();
    while (Date.now() <= boundary + 2) {
      // The next ids must carry a later millisecond than the boundary.
    }
    const partner = (await t.ctx.store.get<{ id: string }>(sql`SELECT id FROM partners`))!;
    const channel = (await t.ctx.store.get<{ id: string; gateway_id: string }>(
      sql`SELECT id, gateway_id FROM channels`,
    ))!;
    const young: string[] = [];
    for (const i of [1, 2])
      young.push((await outboundSms(t.ctx, partner.id, { ...channel, sender: '+1555' }, { text: `young ${i}` })).id);
    await settle(young);
    t.clock.now = boundary + 1 + 10 * DAY;
    expect(await redactOldContent(t.ctx, 10, { pause: noPause })).toEqual({ redacted: 3, held: 0 });
    for (const id of old) expect((await content(id)).kind).toBe('redacted');
    for (const id of young) expect((await content(id)).kind).toBe('text');
  });

  it('keeps a message that is still queued or sending until it settles, then redacts it', async () => {
    const { ids } = await scene(5);
    await settle([ids[0], ids[2], ids[4]]);
    await t.ctx.store.run(sql`UPDATE messages SET status = 'sending' WHERE id = ${ids[3]}`);
    t.clock.now = Date.now() + 31 * DAY;
    expect(await redactOldContent(t.ctx, 30, { batch: 2, pause: noPause })).toEqual({ redacted: 3, held: 2 });
    expect(await content(ids[1])).toEqual({ kind: 'text', text: 'personal 1' });
    expect(await content(ids[3])).toEqual({ kind: 'text', text: 'personal 3' });
    await settle([ids[1]], 'failed');
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 1, held: 1 });
    expect((await content(ids[1])).kind).toBe('redacted');
    await settle([ids[3]], 'sent');
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 1, held: 0 });
    expect(await content(ids[3])).toMatchObject({ kind: 'redacted', was: 'text' });
  });

  // SQLite's own: its one connection shares a prepared statement per SQL text, which other code
  // could reset between retention's reads. PostgreSQL's pool prepares nothing across queries.
  it.skipIf(testStore === 'postgres')(
    'never redacts a held message that is still unsettled, whatever else prepares the same SQL meanwhile',
    async () => {
      const { ids } = await scene(6);
      t.clock.now = Date.now() + 31 * DAY;
      // All six are still queued: remembered, none redacted.
      expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 0, held: 6 });
      // Between two transactions of the next run, other code prepares the statements retention
      // reads with, on the same connection (the connection's prepare() shares one per SQL text).
      const meanwhile = async () => {
        t.ctx.db.sqlite.prepare(`SELECT status FROM messages WHERE id = ?`).get(ids[0]);
        t.ctx.db.sqlite.prepare(`SELECT value FROM meta WHERE key = ?`).get('x');
      };
      expect(await redactOldContent(t.ctx, 30, { batch: 2, pause: meanwhile })).toEqual({ redacted: 0, held: 6 });
      for (const [i, id] of ids.entries()) expect(await content(id)).toEqual({ kind: 'text', text: `personal ${i}` });
    },
  );

  it('gives the event loop back between batches', async () => {
    const { ids } = await scene(10);
    await settle(ids);
    t.clock.now = Date.now() + 31 * DAY;
    let pauses = 0;
    const r = await redactOldContent(t.ctx, 30, { batch: 3, pause: async () => void pauses++ });
    expect(r.redacted).toBe(10);
    expect(pauses).toBeGreaterThanOrEqual(3);
  });
});

describe('login audit retention', () => {
  it('deletes old login, failed login and logout entries and keeps every other entry', async () => {
    await scene(0);
    const at = async (ms: number, action: string, target = 'user') => {
      t.clock.now = ms;
      await auditIn(t.ctx, t.ctx.store, 'ui:ops@example.com', action, target, null);
      return (await t.ctx.store.get<{ id: number }>(sql`SELECT MAX(id) AS id FROM audit_log`))!.id;
    };
    const now = Date.now();
    const old = now - 100 * DAY;
    const gone: number[] = [];
    for (const a of ['ui.login', 'ui.login_failed', 'cli.login', 'login.failed', 'ui.logout'])
      gone.push(await at(old, a, 'session'));
    await at(old, 'balance.topup', 'partner');
    await at(old, 'gateway.update', 'gateway');
    await at(now - 10 * DAY, 'ui.login', 'session');
    const all = ((await rows(`SELECT id FROM audit_log ORDER BY id`)) as { id: number }[]).map((r) => r.id);
    t.clock.now = now;
    expect(await pruneLoginAudit(t.ctx, 90, { batch: 2, pause: noPause })).toBe(5);
    expect(((await rows(`SELECT id FROM audit_log ORDER BY id`)) as { id: number }[]).map((r) => r.id)).toEqual(
      all.filter((id) => !gone.includes(id)),
    );
    expect(await rows(`SELECT action FROM audit_log WHERE action LIKE '%log%'`)).toEqual([{ action: 'ui.login' }]);
  });
});

describe('in msgd', () => {
  it('runs hourly as a maintenance task with the configured limits, backups only when scheduled', async () => {
    const { startTestServer } = await import('../helpers/server.js');
    const server = await startTestServer({ 'retention.messageContentDays': 1, 'retention.loginAuditDays': 1 });
    try {
      const kinds = server.rt.worker.registeredKinds();
      expect(kinds).toContain(maintenanceKind('retention'));
      expect(kinds).not.toContain(maintenanceKind('backup'));
      const task = builtinTasks(serverStore).find((m) => m.name === 'retention')!;
      expect(task.cron).toBe('53 * * * *');
      const p = await setupPartner(server.ctx, { balance: '10' });
      const { gateway, channel } = await connect(server.ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550001111');
      const m = await outboundSms(server.ctx, p.partnerId, { id: channel.id, gateway_id: gateway.id, sender: null });
      await server.ctx.store.run(sql`UPDATE messages SET status = 'delivered' WHERE id = ${m.id}`);
      await auditIn(server.ctx, server.ctx.store, 'ui:a@example.com', 'ui.login', 'session', null);
      await server.ctx.store.run(sql`UPDATE audit_log SET created_at = created_at - ${2 * DAY}`);
      const real = server.ctx.now;
      server.ctx.now = () => real() + 2 * DAY;
      try {
        expect(await task.run(server.rt)).toEqual({ content: { redacted: 1, held: 0 }, loginAuditDeleted: 1 });
      } finally {
        server.ctx.now = real;
      }
    } finally {
      await server.stop();
    }
  });
});
