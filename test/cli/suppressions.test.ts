import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addSuppression } from '../../src/core/suppressions.js';
import { openTestCtx, type TestCtx } from '../helpers/ctx.js';
import { connect, setupPartner } from '../helpers/server.js';
import { runCli, runJson, withDb } from '../helpers/cli.js';

// msgctl suppressions list|add|remove|scope against a real data dir.

let t: TestCtx;
let stopId: string;

beforeAll(async () => {
  t = openTestCtx();
  const p = await setupPartner(t.ctx, { slug: 'acme' });
  await setupPartner(t.ctx, { slug: 'other' });
  await connect(t.ctx, p.partnerId, { kind: 'sandbox', name: 'sbx' }, 'sms', '+15550001111');
  stopId = t.ctx.db.sqlite.transaction(
    () =>
      addSuppression(t.ctx, {
        partnerId: p.partnerId,
        channel: 'sms',
        address: '+14155550123',
        reason: 'opt_out_keyword',
        scope: '+15550001111',
        source: 'msg_01kzzzzzzzzzzzzzzzzzzzzzzz',
        detail: 'replied "STOP" to +15550001111',
      }).row.id,
  )();
  t.dd.close();
});
afterAll(() => t.close());

describe('msgctl suppressions', () => {
  it('adds (normalized), lists with filters, as text and --json', async () => {
    const added = await runJson(['suppressions', 'add', 'acme', 'email', ' Ann@Example.com', '--note', 'by phone'], {
      dataDir: t.dir,
    });
    expect(added).toMatchObject({ address: 'ann@example.com', reason: 'manual', created: true, detail: 'by phone' });
    expect(added.source).toMatch(/^cli:/);
    const again = await runJson(['suppressions', 'add', 'acme', 'email', 'ann@example.com'], { dataDir: t.dir });
    expect(again).toMatchObject({ id: added.id, created: false });

    const all = await runJson(['suppressions', 'list', 'acme'], { dataDir: t.dir });
    expect(all.data.map((s: any) => s.id)).toEqual([added.id, stopId]);
    expect(all.opt_out_scope).toBe('sender');
    const sms = await runJson(['suppressions', 'list', 'acme', '--channel', 'sms'], { dataDir: t.dir });
    expect(sms.data.map((s: any) => s.id)).toEqual([stopId]);
    const search = await runJson(['suppressions', 'list', 'acme', '--address', 'ann@'], { dataDir: t.dir });
    expect(search.data.map((s: any) => s.id)).toEqual([added.id]);
    expect((await runJson(['suppressions', 'list', 'other'], { dataDir: t.dir })).data).toEqual([]);

    const text = await runCli(['suppressions', 'list', 'acme'], { dataDir: t.dir });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^sms\s+\+14155550123\s+opt_out_keyword\s+\+15550001111\s/m);
    expect(text.stdout).toMatch(/^email\s+ann@example\.com\s+manual\s+all\s/m);
  });

  it('refuses bad input clearly and changes nothing', async () => {
    const bad = await runCli(['suppressions', 'add', 'acme', 'sms', '\u001b[31m+1'], { dataDir: t.dir });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/E\.164/);
    expect(bad.stderr).not.toContain('\u001b[31m');
    const reason = await runCli(
      ['suppressions', 'add', 'acme', 'sms', '+14155550199', '--reason', 'provider_refused'],
      {
        dataDir: t.dir,
      },
    );
    expect(reason.code).toBe(2);
    const fax = await runCli(['suppressions', 'add', 'acme', 'fax', '+14155550199'], { dataDir: t.dir });
    expect(fax.code).not.toBe(0);
    const count = withDb(
      t.dir,
      (db) => (db.prepare('SELECT count(*) AS n FROM suppressions').get() as { n: number }).n,
    );
    expect(count).toBe(2);
  });

  it('removes; a keyword opt-out only with --consent-confirmed, audited with the operator', async () => {
    const refused = await runCli(['suppressions', 'remove', 'acme', stopId], { dataDir: t.dir });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/consent/);
    const wrongPartner = await runCli(['suppressions', 'remove', 'other', stopId, '--consent-confirmed'], {
      dataDir: t.dir,
    });
    expect(wrongPartner.code).not.toBe(0);
    expect(wrongPartner.stderr).toMatch(/not found/);
    const ok = await runJson(['suppressions', 'remove', 'acme', stopId, '--consent-confirmed'], { dataDir: t.dir });
    expect(ok).toMatchObject({ id: stopId, removed: true });
    const audit = withDb(
      t.dir,
      (db) =>
        db
          .prepare("SELECT actor, details FROM audit_log WHERE action = 'suppression.remove' AND target_id = ?")
          .get(stopId) as { actor: string; details: string },
    );
    expect(audit.actor).toMatch(/^cli:/);
    expect(JSON.parse(audit.details)).toMatchObject({ consent_confirmed: true });
  });

  it('shows and sets the opt-out scope', async () => {
    expect(await runJson(['suppressions', 'scope', 'acme'], { dataDir: t.dir })).toEqual({
      partner: 'acme',
      opt_out_scope: 'sender',
    });
    expect((await runJson(['suppressions', 'scope', 'acme', 'partner'], { dataDir: t.dir })).opt_out_scope).toBe(
      'partner',
    );
    const bad = await runCli(['suppressions', 'scope', 'acme', 'world'], { dataDir: t.dir });
    expect(bad.code).toBe(2);
  });
});
