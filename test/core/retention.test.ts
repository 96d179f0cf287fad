import { afterEach, describe, expect, it } from 'vitest';
import { audit } from '../../src/core/audit.js';
import { pruneLoginAudit, redactOldContent } from '../../src/core/retention.js';
import { builtinTasks, maintenanceKind } from '../../src/jobs/maintenance.js';
import { connect, setupPartner, storeOutboundSms } from '../helpers/server.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';

// Message content after retention.messageContentDays: gone from the row, while the row's
// metadata, its status history and the ledger stay exactly as they were.

const DAY = 86_400_000;
let t: TestCtx;
afterEach(() => t?.close());

async function scene(count: number) {
  t = openTestCtx({ clock: true });
  const p = await setupPartner(t.ctx, { balance: '1000' });
  const { gateway, channel } = await connect(t.ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550001111');
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    ids.push(
      storeOutboundSms(
        t.ctx,
        p.partnerId,
        { id: channel.id, gateway_id: gateway.id, sender: '+15550001111' },
        {
          text: `personal ${i}`,
        },
      ).id,
    );
  }
  return { ids, p };
}

const db = () => t.ctx.db.sqlite;
const settle = (ids: string[], status = 'delivered') => {
  const st = db().prepare(`UPDATE messages SET status = ? WHERE id = ?`);
  const h = db().prepare(
    `INSERT INTO message_status_history (message_id, status, occurred_at, created_at) VALUES (?, ?, 1, 1)`,
  );
  for (const id of ids) {
    st.run(status, id);
    h.run(id, status);
  }
};
const content = (id: string) =>
  JSON.parse((db().prepare(`SELECT content FROM messages WHERE id = ?`).get(id) as { content: string }).content);
const rows = (sql: string) => db().prepare(sql).all();
const noPause = async () => {};

describe('message content retention', () => {
  it('redacts the content of settled messages older than the limit, keeping metadata, history and ledger', async () => {
    const { ids } = await scene(7);
    settle(ids);
    const before = {
      messages: rows(`SELECT * FROM messages ORDER BY id`) as Record<string, unknown>[],
      history: rows(`SELECT * FROM message_status_history ORDER BY id`),
      ledger: rows(`SELECT * FROM ledger_entries ORDER BY id`),
    };
    // 29 days later nothing is old enough; 31 days later all are.
    t.clock.now = Date.now() + 29 * DAY;
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 0, held: 0 });
    expect(content(ids[0])).toEqual({ kind: 'text', text: 'personal 0' });
    t.clock.now = Date.now() + 31 * DAY;
    expect(await redactOldContent(t.ctx, 30, { batch: 3, pause: noPause })).toEqual({ redacted: 7, held: 0 });
    for (const id of ids) {
      expect(content(id)).toEqual({ kind: 'redacted', was: 'text', redacted_at: new Date(t.clock.now).toISOString() });
    }
    const after = rows(`SELECT * FROM messages ORDER BY id`) as Record<string, unknown>[];
    expect(after.map(({ content: _c, ...rest }) => rest)).toEqual(
      before.messages.map(({ content: _c, ...rest }) => rest),
    );
    expect(rows(`SELECT * FROM message_status_history ORDER BY id`)).toEqual(before.history);
    expect(rows(`SELECT * FROM ledger_entries ORDER BY id`)).toEqual(before.ledger);
    expect(JSON.stringify(rows(`SELECT * FROM messages`))).not.toContain('personal');
    // A second run finds nothing left to do.
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 0, held: 0 });
  });

  it('redacts only what is older than the limit', async () => {
    const { ids: old } = await scene(3);
    settle(old);
    const boundary = Date.now();
    while (Date.now() <= boundary + 2) {
      // The next ids must carry a later millisecond than the boundary.
    }
    const young = [1, 2].map(
      (i) =>
        storeOutboundSms(
          t.ctx,
          (db().prepare(`SELECT id FROM partners`).get() as { id: string }).id,
          { ...(db().prepare(`SELECT id, gateway_id FROM channels`).get() as any), sender: '+1555' },
          { text: `young ${i}` },
        ).id,
    );
    settle(young);
    t.clock.now = boundary + 1 + 10 * DAY;
    expect(await redactOldContent(t.ctx, 10, { pause: noPause })).toEqual({ redacted: 3, held: 0 });
    for (const id of old) expect(content(id).kind).toBe('redacted');
    for (const id of young) expect(content(id).kind).toBe('text');
  });

  it('keeps a message that is still queued or sending until it settles, then redacts it', async () => {
    const { ids } = await scene(5);
    settle([ids[0], ids[2], ids[4]]);
    db().prepare(`UPDATE messages SET status = 'sending' WHERE id = ?`).run(ids[3]);
    t.clock.now = Date.now() + 31 * DAY;
    expect(await redactOldContent(t.ctx, 30, { batch: 2, pause: noPause })).toEqual({ redacted: 3, held: 2 });
    expect(content(ids[1])).toEqual({ kind: 'text', text: 'personal 1' });
    expect(content(ids[3])).toEqual({ kind: 'text', text: 'personal 3' });
    settle([ids[1]], 'failed');
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 1, held: 1 });
    expect(content(ids[1]).kind).toBe('redacted');
    settle([ids[3]], 'sent');
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 1, held: 0 });
    expect(content(ids[3])).toMatchObject({ kind: 'redacted', was: 'text' });
  });

  it('never redacts a held message that is still unsettled, whatever else prepares the same SQL meanwhile', async () => {
    const { ids } = await scene(6);
    t.clock.now = Date.now() + 31 * DAY;
    // All six are still queued: remembered, none redacted.
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 0, held: 6 });
    // Between two transactions of the next run, other code prepares the statements retention
    // reads with, on the same connection (the connection's prepare() shares one per SQL text).
    const meanwhile = async () => {
      db().prepare(`SELECT status FROM messages WHERE id = ?`).get(ids[0]);
      db().prepare(`SELECT value FROM meta WHERE key = ?`).get('x');
    };
    expect(await redactOldContent(t.ctx, 30, { batch: 2, pause: meanwhile })).toEqual({ redacted: 0, held: 6 });
    for (const [i, id] of ids.entries()) expect(content(id)).toEqual({ kind: 'text', text: `personal ${i}` });
  });

  it('gives the event loop back between batches', async () => {
    const { ids } = await scene(10);
    settle(ids);
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
    const at = (ms: number, action: string, target = 'user') => {
      t.clock.now = ms;
      audit(t.ctx, 'ui:ops@example.com', action, target, null);
      return (db().prepare(`SELECT MAX(id) AS id FROM audit_log`).get() as { id: number }).id;
    };
    const now = Date.now();
    const old = now - 100 * DAY;
    const gone = ['ui.login', 'ui.login_failed', 'cli.login', 'login.failed', 'ui.logout'].map((a) =>
      at(old, a, 'session'),
    );
    at(old, 'balance.topup', 'partner');
    at(old, 'gateway.update', 'gateway');
    at(now - 10 * DAY, 'ui.login', 'session');
    const all = (rows(`SELECT id FROM audit_log ORDER BY id`) as { id: number }[]).map((r) => r.id);
    t.clock.now = now;
    expect(await pruneLoginAudit(t.ctx, 90, { batch: 2, pause: noPause })).toBe(5);
    expect((rows(`SELECT id FROM audit_log ORDER BY id`) as { id: number }[]).map((r) => r.id)).toEqual(
      all.filter((id) => !gone.includes(id)),
    );
    expect(rows(`SELECT action FROM audit_log WHERE action LIKE '%log%'`)).toEqual([{ action: 'ui.login' }]);
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
      const task = builtinTasks('sqlite').find((m) => m.name === 'retention')!;
      expect(task.cron).toBe('53 * * * *');
      const p = await setupPartner(server.ctx, { balance: '10' });
      const { gateway, channel } = await connect(server.ctx, p.partnerId, { kind: 'sandbox' }, 'sms', '+15550001111');
      const m = storeOutboundSms(server.ctx, p.partnerId, { id: channel.id, gateway_id: gateway.id, sender: null });
      server.ctx.db.sqlite.prepare(`UPDATE messages SET status = 'delivered' WHERE id = ?`).run(m.id);
      audit(server.ctx, 'ui:a@example.com', 'ui.login', 'session', null);
      server.ctx.db.sqlite.prepare(`UPDATE audit_log SET created_at = created_at - 2 * ?`).run(DAY);
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
