import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addSuppressionIn } from '../../src/core/suppressions.js';
import { sql } from '../../src/db/sql.js';
import { connect, setupPartner } from '../helpers/server.js';
import { type CliStore, cliStore, runCli, runJson } from '../helpers/cli.js';

// msgctl suppressions list|add|remove|scope against a real data dir.

let s: CliStore;
let stopId: string;

beforeAll(async () => {
  s = await cliStore();
  stopId = await s.withCtx(async (ctx) => {
    const p = await setupPartner(ctx, { slug: 'acme' });
    await setupPartner(ctx, { slug: 'other' });
    await connect(ctx, p.partnerId, { kind: 'sandbox', name: 'sbx' }, 'sms', '+15550001111');
    return ctx.store.transaction(
      async (tx) =>
        (
          await addSuppressionIn(tx, ctx, {
            partnerId: p.partnerId,
            channel: 'sms',
            address: '+14155550123',
            reason: 'opt_out_keyword',
            scope: '+15550001111',
            source: 'msg_01kzzzzzzzzzzzzzzzzzzzzzzz',
            detail: 'replied "STOP" to +15550001111',
          })
        ).row.id,
    );
  });
});
afterAll(() => s.drop());

describe('msgctl suppressions', () => {
  it('adds (normalized), lists with filters, as text and --json', async () => {
    const added = await runJson(
      ['suppressions', 'add', 'acme', 'email', ' Ann@Example.com', '--note', 'by phone'],
      s.opts(),
    );
    expect(added).toMatchObject({ address: 'ann@example.com', reason: 'manual', created: true, detail: 'by phone' });
    expect(added.source).toMatch(/^cli:/);
    const again = await runJson(['suppressions', 'add', 'acme', 'email', 'ann@example.com'], s.opts());
    expect(again).toMatchObject({ id: added.id, created: false });

    const all = await runJson(['suppressions', 'list', 'acme'], s.opts());
    expect(all.data.map((s: any) => s.id)).toEqual([added.id, stopId]);
    expect(all.opt_out_scope).toBe('sender');
    const sms = await runJson(['suppressions', 'list', 'acme', '--channel', 'sms'], s.opts());
    expect(sms.data.map((s: any) => s.id)).toEqual([stopId]);
    const search = await runJson(['suppressions', 'list', 'acme', '--address', 'ann@'], s.opts());
    expect(search.data.map((s: any) => s.id)).toEqual([added.id]);
    expect((await runJson(['suppressions', 'list', 'other'], s.opts())).data).toEqual([]);

    const text = await runCli(['suppressions', 'list', 'acme'], s.opts());
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^sms\s+\+14155550123\s+opt_out_keyword\s+\+15550001111\s/m);
    expect(text.stdout).toMatch(/^email\s+ann@example\.com\s+manual\s+all\s/m);
  });

  it('refuses bad input clearly and changes nothing', async () => {
    const bad = await runCli(['suppressions', 'add', 'acme', 'sms', '\u001b[31m+1'], s.opts());
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/E\.164/);
    expect(bad.stderr).not.toContain('\u001b[31m');
    const reason = await runCli(
      ['suppressions', 'add', 'acme', 'sms', '+14155550199', '--reason', 'provider_refused'],
      s.opts(),
    );
    expect(reason.code).toBe(2);
    const fax = await runCli(['suppressions', 'add', 'acme', 'fax', '+14155550199'], s.opts());
    expect(fax.code).not.toBe(0);
    const count = await s.withCtx(
      async (ctx) => (await ctx.store.get<{ n: number }>(sql`SELECT count(*) AS n FROM suppressions`))!.n,
    );
    expect(count).toBe(2);
  });

  it('removes; a keyword opt-out only with --consent-confirmed, audited with the operator', async () => {
    const refused = await runCli(['suppressions', 'remove', 'acme', stopId], s.opts());
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/consent/);
    const wrongPartner = await runCli(['suppressions', 'remove', 'other', stopId, '--consent-confirmed'], s.opts());
    expect(wrongPartner.code).not.toBe(0);
    expect(wrongPartner.stderr).toMatch(/not found/);
    const ok = await runJson(['suppressions', 'remove', 'acme', stopId, '--consent-confirmed'], s.opts());
    expect(ok).toMatchObject({ id: stopId, removed: true });
    const audit = (await s.withCtx((ctx) =>
      ctx.store.get<{ actor: string; details: string }>(
        sql`SELECT actor, details FROM audit_log WHERE action = 'suppression.remove' AND target_id = ${stopId}`,
      ),
    ))!;
    expect(audit.actor).toMatch(/^cli:/);
    expect(JSON.parse(audit.details)).toMatchObject({ consent_confirmed: true });
  });

  it('shows and sets the opt-out scope', async () => {
    expect(await runJson(['suppressions', 'scope', 'acme'], s.opts())).toEqual({
      partner: 'acme',
      opt_out_scope: 'sender',
    });
    expect((await runJson(['suppressions', 'scope', 'acme', 'partner'], s.opts())).opt_out_scope).toBe('partner');
    const bad = await runCli(['suppressions', 'scope', 'acme', 'world'], s.opts());
    expect(bad.code).toBe(2);
  });
});
