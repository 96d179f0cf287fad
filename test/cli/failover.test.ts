import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveCircuit } from '../../src/core/circuits.js';
import { type CliStore, cliStore, runCli, runJson, type RunOptions } from '../helpers/cli.js';

// The operator's side of failover: a partner's SMS order (primary, fallbacks with their own
// senders), prices per gateway with their precedence, and a gateway's circuit in gateway show.

let s: CliStore;
const run = (args: string[], opts: RunOptions = {}) => runCli(args, s.opts(opts));
const json = (args: string[], opts: RunOptions = {}) => runJson(args, s.opts(opts));

beforeAll(async () => {
  s = await cliStore();
  await json(['partner', 'create', 'acme', '--name', 'Acme Ltd']);
  for (const name of ['sbx-a', 'sbx-b', 'sbx-c']) await json(['gateway', 'add', 'sandbox', '--name', name]);
});
afterAll(() => s.drop());

describe('msgctl channel fallbacks', () => {
  it('assign --fallback builds the order; fallback add/list/remove edit it', async () => {
    const a = await json([
      'channel',
      'assign',
      'acme',
      'sbx-a',
      'sms',
      '--from',
      '+15550001111',
      '--fallback',
      'sbx-b',
      '--fallback-from',
      '+15550002222',
    ]);
    expect(a).toMatchObject({ position: 0, role: 'primary', sender: '+15550001111' });
    expect(a.fallbacks).toMatchObject([{ position: 1, role: 'fallback', sender: '+15550002222' }]);

    // Without --from a fallback sends from the primary's number.
    const added = await run(['channel', 'fallback', 'add', 'acme', 'sms', 'sbx-c']);
    expect(added.code).toBe(0);
    expect(added.stdout).toContain("Added sbx-c as fallback 2 of acme's sms.");
    const list = await json(['channel', 'fallback', 'list', 'acme', 'sms']);
    expect(list.data.map((c: any) => [c.position, c.gateway.name, c.sender])).toEqual([
      [0, 'sbx-a', '+15550001111'],
      [1, 'sbx-b', '+15550002222'],
      [2, 'sbx-c', '+15550001111'],
    ]);

    const removed = await run(['channel', 'fallback', 'remove', 'acme', 'sms', 'sbx-b']);
    expect(removed.code).toBe(0);
    expect((await json(['channel', 'fallback', 'list', 'acme', 'sms'])).data.map((c: any) => c.gateway.name)).toEqual([
      'sbx-a',
      'sbx-c',
    ]);

    // Clear refusals, nothing changed.
    const twice = await run(['channel', 'fallback', 'add', 'acme', 'sms', 'sbx-a']);
    expect(twice.code).not.toBe(0);
    expect(twice.stderr).toContain('gateway sbx-a is already the primary');
    const primary = await run(['channel', 'fallback', 'remove', 'acme', 'sms', 'sbx-a']);
    expect(primary.stderr).toContain('unassign the channel instead');
    await json(['channel', 'assign', 'acme', 'sbx-a', 'whatsapp', '--from', '+15550003333']);
    const wa = await run(['channel', 'fallback', 'add', 'acme', 'whatsapp', 'sbx-b']);
    expect(wa.code).not.toBe(0);
    expect(wa.stderr).toContain("a WhatsApp conversation's window and templates belong to one number");
    expect((await json(['channel', 'fallback', 'list', 'acme', 'sms'])).data).toHaveLength(2);

    // Unassigning the primary makes the first fallback the primary.
    await json(['channel', 'unassign', 'acme', 'sms']);
    expect((await json(['channel', 'fallback', 'list', 'acme', 'sms'])).data).toMatchObject([
      { position: 0, role: 'primary', gateway: { name: 'sbx-c' } },
    ]);
  });
});

describe('msgctl price set --gateway', () => {
  it('stores a gateway price and a partner+gateway price, listed with what they apply to', async () => {
    await json(['price', 'set', 'sms', '0.01']);
    const g = await json(['price', 'set', 'sms', '0.02', '--gateway', 'sbx-b']);
    expect(g).toMatchObject({ scope: 'gateway', gateway: 'sbx-b', partner: null, amount: { amount: '0.02' } });
    const pg = await json(['price', 'set', 'sms', '0.015', '--gateway', 'sbx-b', '--partner', 'acme']);
    expect(pg).toMatchObject({ scope: 'partner_gateway', gateway: 'sbx-b', partner: 'acme' });
    const text = (await run(['price', 'list'])).stdout;
    expect(text).toMatch(/sms\s+acme through sbx-b\s+0\.015/);
    expect(text).toMatch(/sms\s+through sbx-b\s+0\.02/);
    const bad = await run(['price', 'set', 'sms', '0.02', '--gateway', 'nope']);
    expect(bad.code).not.toBe(0);
    await json(['price', 'unset', 'sms', '--gateway', 'sbx-b', '--partner', 'acme']);
    expect((await json(['price', 'list'])).data.map((p: any) => p.scope).sort()).toEqual(['default', 'gateway']);
  });
});

describe('msgctl gateway show', () => {
  it("shows the gateway's circuit as msgd last published it", async () => {
    const closed = await json(['gateway', 'show', 'sbx-a']);
    expect(closed.circuit).toMatchObject({ state: 'closed', failures: 0, opened: 0 });
    const id = closed.id as string;
    await s.withCtx((ctx) =>
      saveCircuit(ctx, {
        gateway_id: id,
        state: 'open',
        failures: 5,
        retry_at: Date.now() + 30_000,
        reason: '5 failed calls in a row (last: network_error)',
        opened: 1,
        changed_at: Date.now(),
      }),
    );
    const shown = await run(['gateway', 'show', 'sbx-a']);
    expect(shown.stdout).toMatch(/circuit\s+open: probes again in (29|30)s \(5 failed calls in a row/);
    expect((await json(['gateway', 'show', 'sbx-a'])).circuit).toMatchObject({ state: 'open', opened: 1 });
  });
});
