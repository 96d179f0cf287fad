import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pruneLoginAudit, redactOldContent } from '../../src/core/retention.js';
import { sql } from '../../src/db/sql.js';
import { builtinTasks, type MaintenanceDeps } from '../../src/jobs/maintenance.js';
import { webhookRetentionTask } from '../../src/webhooks-in/process.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { idAt } from './read-fixtures.js';

// Retention on both stores: message content redacted after its days (settled messages only,
// in batches, from a watermark), login audit entries pruned, and the provider webhook log
// trimmed, as msgd's maintenance tasks run them with the configured limits.

const DAY = 86_400_000;
const T0 = Date.UTC(2026, 0, 1);
const noPause = async () => {};

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  t.clock.now = T0;
  await t.exec(`INSERT INTO partners (id, slug, name, created_at, updated_at) VALUES ('prt_a', 'acme', 'Acme', 0, 0)`);
});
afterEach(() => t.close());

let seq = 0;
async function message(at: number, status: string, text: string): Promise<string> {
  // Ids begin with their creation time (not ulid(): it never goes back in time within a
  // process); the suffix keeps those of one millisecond in order.
  const id = idAt('msg', at, seq++);
  await t.ctx.store.run(
    sql`INSERT INTO messages (id, partner_id, direction, channel_type, "to", "from", content, status, price, created_at, updated_at)
        VALUES (${id}, 'prt_a', 'outbound', 'sms', '+15550002222', '+15550001111',
                ${JSON.stringify({ kind: 'text', text })}, ${status}, 7500, ${at}, ${at})`,
  );
  return id;
}

const content = async (id: string) =>
  JSON.parse((await t.ctx.store.get<{ content: string }>(sql`SELECT content FROM messages WHERE id = ${id}`))!.content);
const meta = async (key: string) =>
  (await t.ctx.store.get<{ value: string }>(sql`SELECT value FROM meta WHERE key = ${key}`))?.value;

describe('redactOldContent', () => {
  it('redacts settled messages past the limit, holds unsettled ones until they settle, keeps the rest', async () => {
    const old = [];
    for (let i = 0; i < 5; i++) old.push(await message(T0 + i, 'delivered', `personal ${i}`));
    const sending = await message(T0 + 10, 'sending', 'in flight');
    const recent = await message(T0 + 20 * DAY, 'delivered', 'recent');

    t.clock.now = T0 + 31 * DAY;
    const at = new Date(t.clock.now).toISOString();
    expect(await redactOldContent(t.ctx, 30, { batch: 2, pause: noPause })).toEqual({ redacted: 5, held: 1 });
    for (const id of old) expect(await content(id)).toEqual({ kind: 'redacted', was: 'text', redacted_at: at });
    expect(await content(sending)).toEqual({ kind: 'text', text: 'in flight' });
    expect(await content(recent)).toEqual({ kind: 'text', text: 'recent' });
    expect(JSON.parse((await meta('retention.content_held'))!)).toEqual([sending]);
    expect(await meta('retention.content_upto')).toBe(sending);
    // The row itself stays: who, when, status, price.
    expect(await t.ctx.store.get(sql`SELECT status, price, created_at FROM messages WHERE id = ${old[0]}`)).toEqual({
      status: 'delivered',
      price: 7500,
      created_at: T0,
    });

    // Nothing new: the held message is still sending, and is not redacted.
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 0, held: 1 });
    await t.ctx.store.run(sql`UPDATE messages SET status = 'failed' WHERE id = ${sending}`);
    t.clock.now += DAY;
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 1, held: 0 });
    expect(await content(sending)).toMatchObject({ kind: 'redacted', was: 'text' });
    // A second run with nothing to do changes nothing; an earlier redaction keeps its time.
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 0, held: 0 });
    expect(await content(old[0])).toEqual({ kind: 'redacted', was: 'text', redacted_at: at });

    t.clock.now = T0 + 51 * DAY;
    expect(await redactOldContent(t.ctx, 30, { pause: noPause })).toEqual({ redacted: 1, held: 0 });
    expect(await content(recent)).toMatchObject({ kind: 'redacted', was: 'text' });
  });
});

describe('pruneLoginAudit', () => {
  it('deletes login and logout entries older than the limit, whatever their case, and keeps the rest', async () => {
    const rows: [string, number][] = [
      ['ui.login', T0],
      ['ui.login_failed', T0 + 1],
      ['cli.LOGOUT', T0 + 2],
      ['balance.adjust', T0 + 3],
      ['token.issue', T0 + 4],
      ['ui.login', T0 + 40 * DAY],
    ];
    for (const [action, at] of rows)
      await t.ctx.store.run(
        sql`INSERT INTO audit_log (actor, action, target_type, created_at) VALUES ('operator:x', ${action}, 'user', ${at})`,
      );
    t.clock.now = T0 + 45 * DAY;
    expect(await pruneLoginAudit(t.ctx, 30, { batch: 2, pause: noPause })).toBe(3);
    const left = await t.ctx.store.all<{ action: string }>(sql`SELECT action FROM audit_log ORDER BY id`);
    expect(left.map((r) => r.action)).toEqual(['balance.adjust', 'token.issue', 'ui.login']);
    expect(await pruneLoginAudit(t.ctx, 30, { pause: noPause })).toBe(0);
  });
});

describe('as maintenance tasks', () => {
  const deps = (retention: Partial<MaintenanceDeps['config']['retention']>, webhooksIn = {}): MaintenanceDeps => ({
    ctx: t.ctx,
    config: {
      ...t.ctx.config,
      retention: { ...t.ctx.config.retention, ...retention },
      webhooksIn: { ...t.ctx.config.webhooksIn, ...webhooksIn },
    },
    logger: pino({ level: 'silent' }),
  });
  const retention = {
    run: (rt: MaintenanceDeps) =>
      builtinTasks(t.dialect)
        .find((x) => x.name === 'retention')!
        .run(rt),
  };

  it('retention redacts content past retention.messageContentDays and login audit past loginAuditDays', async () => {
    const old = await message(T0, 'delivered', 'old');
    const young = await message(T0 + 20 * DAY, 'delivered', 'young');
    for (const [action, at] of [
      ['ui.login', T0],
      ['partner.create', T0],
      ['ui.logout', T0 + 20 * DAY],
    ] as const)
      await t.ctx.store.run(
        sql`INSERT INTO audit_log (actor, action, target_type, created_at) VALUES ('operator:x', ${action}, 'user', ${at})`,
      );
    t.clock.now = T0 + 31 * DAY;
    // Content is kept for good unless messageContentDays is set; login audit goes after its days.
    expect(await retention.run(deps({ loginAuditDays: 30 }))).toEqual({ content: null, loginAuditDeleted: 1 });
    expect(await content(old)).toEqual({ kind: 'text', text: 'old' });
    expect(await retention.run(deps({ messageContentDays: 30, loginAuditDays: 30 }))).toEqual({
      content: { redacted: 1, held: 0 },
      loginAuditDeleted: 0,
    });
    expect(await content(old)).toMatchObject({ kind: 'redacted', was: 'text' });
    expect(await content(young)).toEqual({ kind: 'text', text: 'young' });
    const left = await t.ctx.store.all<{ action: string }>(sql`SELECT action FROM audit_log ORDER BY id`);
    expect(left.map((r) => r.action)).toEqual(['partner.create', 'ui.logout']);
  });

  it('provider-webhooks-expire deletes the webhook log past webhooksIn.retentionDays, whatever its state', async () => {
    const add = async (n: number, at: number, processing: string) => {
      const id = idAt('wh', at, n);
      await t.ctx.store.run(
        sql`INSERT INTO provider_webhooks (id, provider, method, path, headers, body, verification, processing, received_at)
            VALUES (${id}, 'twilio', 'POST', '/webhooks/twilio', '{}', ${Buffer.from('a=1')}, 'ok', ${processing}, ${at})`,
      );
      return id;
    };
    await add(1, T0, 'processed');
    await add(2, T0 + 1, 'pending');
    const edge = await add(3, T0 + 2 * DAY, 'processed');
    const young = await add(4, T0 + 9 * DAY, 'unroutable');
    t.clock.now = T0 + 9 * DAY;
    const task = webhookRetentionTask();
    expect(await task.run(deps({}, { retentionDays: 7 }))).toEqual({ deleted: 2 });
    const left = await t.ctx.store.all<{ id: string }>(sql`SELECT id FROM provider_webhooks ORDER BY id`);
    expect(left.map((r) => r.id)).toEqual([edge, young]);
    expect(await task.run(deps({}, { retentionDays: 7 }))).toEqual({ deleted: 0 });
  });
});
