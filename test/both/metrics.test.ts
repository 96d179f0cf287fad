import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { MetricsDeps } from '../../src/http/deps.js';
import { registerCollectors } from '../../src/http/metrics/collectors.js';
import { LeaderListeners, soleLeader } from '../../src/db/leader.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';

// The gauges /metrics reads from the database at scrape time, on both stores: jobs by kind and
// state, partners under their low-balance threshold, partner endpoints by status, gateways.

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx();
});
afterEach(() => t.close());

/** A scrape's text, as Prometheus reads it, from the collectors over this store. */
async function scrape(lowDefault: string | null = null, leader: MetricsDeps['leader'] = soleLeader()): Promise<string> {
  const registry = new Registry();
  const config = t.ctx.config;
  const rt = {
    ctx: t.ctx,
    config: { ...config, billing: { ...config.billing, balanceLowThreshold: lowDefault } },
    version: '0.0.0-test',
    storage: { readiness: () => ({ ok: true, checks: [] }) },
    worker: { registeredKinds: () => ['dispatch', 'webhook.process'] },
    webhooksOut: { worker: { registeredKinds: () => ['webhook.deliver'] } },
    leader,
  } as unknown as MetricsDeps;
  registerCollectors(registry, { rt });
  return registry.metrics();
}

const line = (text: string, series: string) =>
  text.split('\n').find((l) => l.startsWith(`${series} `) || l === series) ?? null;

describe('metrics gauges read from the store', () => {
  it('counts jobs by kind and state, every registered kind and state at 0 when empty', async () => {
    const job = (kind: string, state: string) => `('${kind}', '{}', '${state}', 0, 1, 5, 0, 0)`;
    await t.exec(`INSERT INTO jobs (kind, payload, state, priority, run_at, max_attempts, created_at, updated_at) VALUES
      ${job('dispatch', 'available')}, ${job('dispatch', 'available')}, ${job('dispatch', 'dead')},
      ${job('webhook.process', 'retry')}, ${job('webhook.deliver', 'running')}`);
    const m = await scrape();
    expect(line(m, 'msgd_jobs{kind="dispatch",state="available"}')).toBe(
      'msgd_jobs{kind="dispatch",state="available"} 2',
    );
    expect(line(m, 'msgd_jobs{kind="dispatch",state="dead"}')).toBe('msgd_jobs{kind="dispatch",state="dead"} 1');
    expect(line(m, 'msgd_jobs{kind="dispatch",state="retry"}')).toBe('msgd_jobs{kind="dispatch",state="retry"} 0');
    expect(line(m, 'msgd_jobs{kind="webhook.process",state="retry"}')).toBe(
      'msgd_jobs{kind="webhook.process",state="retry"} 1',
    );
    expect(line(m, 'msgd_jobs{kind="webhook.deliver",state="running"}')).toBe(
      'msgd_jobs{kind="webhook.deliver",state="running"} 1',
    );
  });

  it('counts active partners under their own threshold, else the configured default', async () => {
    await insertPartner(t, { id: 'p1', slug: 'one' });
    await insertPartner(t, { id: 'p2', slug: 'two' });
    await insertPartner(t, { id: 'p3', slug: 'three', status: 'suspended' });
    // p1: 1.00 under its own 5.00; p2: 9.00 over its own 2.00; p3 is suspended.
    await t.exec(`UPDATE partners SET balance = 1000000, low_balance_threshold = 5000000 WHERE id = 'p1';
      UPDATE partners SET balance = 9000000, low_balance_threshold = 2000000 WHERE id = 'p2';
      UPDATE partners SET balance = 0, low_balance_threshold = 5000000 WHERE id = 'p3'`);
    expect(line(await scrape(), 'msgd_partners_below_low_balance')).toBe('msgd_partners_below_low_balance 1');
    await t.exec(`UPDATE partners SET low_balance_threshold = NULL WHERE id = 'p2'`);
    // Without a threshold of its own, p2 is measured against billing.balanceLowThreshold, if any.
    expect(line(await scrape(), 'msgd_partners_below_low_balance')).toBe('msgd_partners_below_low_balance 1');
    expect(line(await scrape('10.00'), 'msgd_partners_below_low_balance')).toBe('msgd_partners_below_low_balance 2');
    expect(line(await scrape('8.00'), 'msgd_partners_below_low_balance')).toBe('msgd_partners_below_low_balance 1');
  });

  it('counts partner endpoints by status, deleted ones not, and lists every gateway once', async () => {
    await insertPartner(t, { id: 'p1', slug: 'one' });
    const ep = (id: string, status: string, deleted: number | null) =>
      `('${id}', 'p1', 'https://example.com/${id}', 'sealed', '${status}', ${deleted ?? 'NULL'}, 0, 0)`;
    await t.exec(`INSERT INTO webhook_endpoints (id, partner_id, url, secret, status, deleted_at, created_at, updated_at) VALUES
      ${ep('we_1', 'enabled', null)}, ${ep('we_2', 'enabled', null)}, ${ep('we_3', 'disabled', null)},
      ${ep('we_4', 'enabled', 5)}`);
    await t.exec(`INSERT INTO gateways (id, kind, name, secrets, status, created_at, updated_at) VALUES
      ('gw_b', 'twilio', 'sms-main', '', 'active', 0, 0), ('gw_a', 'sandbox', 'sbx', '', 'disabled', 0, 0)`);
    const m = await scrape();
    expect(line(m, 'msgd_webhook_endpoints{status="enabled"}')).toBe('msgd_webhook_endpoints{status="enabled"} 2');
    expect(line(m, 'msgd_webhook_endpoints{status="disabled"}')).toBe('msgd_webhook_endpoints{status="disabled"} 1');
    expect(m.split('\n').filter((l) => l.startsWith('msgd_gateway_info{'))).toEqual([
      'msgd_gateway_info{gateway="gw_a",name="sbx",kind="sandbox"} 1',
      'msgd_gateway_info{gateway="gw_b",name="sms-main",kind="twilio"} 1',
    ]);
    expect(line(m, 'msgd_ready')).toBe('msgd_ready 1');
    // The SQLite file sizes only where there is a SQLite file.
    expect(m.includes('msgd_sqlite_file_bytes{file="db"}')).toBe(t.dialect === 'sqlite');
  });
});

describe('gauges read from the store, on the leader only', () => {
  it('are left out while this instance does not lead, and come and go with the leadership', async () => {
    let leading = false;
    const listeners = new LeaderListeners(() => {});
    const registry = new Registry();
    const config = t.ctx.config;
    const rt = {
      ctx: t.ctx,
      config,
      version: '0.0.0-test',
      storage: { readiness: () => ({ ok: true, checks: [] }) },
      worker: { registeredKinds: () => ['dispatch'] },
      webhooksOut: { worker: { registeredKinds: () => [] } },
      leader: { isLeader: () => leading, onChange: (fn: (l: boolean) => void) => listeners.add(fn) },
    } as unknown as MetricsDeps;
    registerCollectors(registry, { rt });
    const names = async () =>
      (await registry.metrics())
        .split('\n')
        .filter((l) => l.startsWith('# TYPE '))
        .map((l) => l.split(' ')[2]);
    const FROM_STORE = ['msgd_jobs', 'msgd_partners_below_low_balance', 'msgd_webhook_endpoints'];
    let shown = await names();
    for (const n of FROM_STORE) expect(shown).not.toContain(n);
    // What every instance exports about itself stays.
    expect(shown).toEqual(expect.arrayContaining(['msgd_ready', 'msgd_gateway_info', 'msgd_build_info']));
    leading = true;
    listeners.emit(true);
    shown = await names();
    for (const n of FROM_STORE) expect(shown).toContain(n);
    expect(line(await registry.metrics(), 'msgd_jobs{kind="dispatch",state="available"}')).toBe(
      'msgd_jobs{kind="dispatch",state="available"} 0',
    );
    leading = false;
    listeners.emit(false);
    shown = await names();
    for (const n of FROM_STORE) expect(shown).not.toContain(n);
  });
});
