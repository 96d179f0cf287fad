import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { sql } from '../../src/db/sql.js';
import { type CliStore, cliStore, oneErrorLine, runCli, runJson, type RunOptions } from '../helpers/cli.js';

// msgctl and the WhatsApp template catalogue: reading it from a fake Graph API that pages as
// Meta's does, listing it, pricing templates per category, and doctor's warning while a
// WhatsApp gateway's catalogue has never been read.

const WABA = '102290129340398';
const TOKEN = 'EAA-cli-token';
let s: CliStore;
const run = (args: string[], opts: RunOptions = {}) => runCli(args, s.opts(opts));
const json = (args: string[], opts: RunOptions = {}) => runJson(args, s.opts(opts));
const doctorCheck = async () => {
  const r = await run(['--json', 'doctor']);
  return JSON.parse(r.stdout).checks.find((c: any) => c.name === 'whatsapp templates');
};

let graph: GraphFake;

beforeAll(async () => {
  graph = await startGraphFake();
  graph.setCatalogue(
    WABA,
    TOKEN,
    Array.from({ length: 130 }, (_, i) => ({
      id: String(5000 + i),
      name: `tpl_${String(i).padStart(3, '0')}`,
      language: 'en_US',
      status: i === 7 ? 'PAUSED' : 'APPROVED',
      category: i % 2 ? 'UTILITY' : 'MARKETING',
      components: [
        { type: 'HEADER', format: 'IMAGE' },
        { type: 'BODY', text: 'Hi {{1}}, {{2}}' },
      ],
    })),
  );
  s = await cliStore();
  await json(['partner', 'create', 'acme', '--name', 'Acme']);
  await json(
    [
      'gateway',
      'add',
      'whatsapp_cloud',
      '--name',
      'wa',
      '--set',
      `base_url=${graph.url}`,
      '--set',
      'phone_number_id=106540352242922',
      '--secret-env',
      'access_token=WA_TOKEN',
    ],
    {
      env: { WA_TOKEN: TOKEN },
    },
  );
});
afterAll(async () => {
  await graph.close();
  await s.drop();
});

describe('msgctl gateway templates', () => {
  it('doctor warns while the gateway has no waba_id; sync says what is missing', async () => {
    expect(await doctorCheck()).toMatchObject({
      status: 'warn',
      message: expect.stringMatching(/wa has no waba_id.*not checked before the debit/),
    });
    const r = await run(['gateway', 'templates', 'sync', 'wa']);
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(/wa has no waba_id setting/);
  });

  it('sync reads every page; list shows status, category and parameters; doctor is quiet', async () => {
    await json(['gateway', 'update', 'wa', '--set', `waba_id=${WABA}`]);
    const r = await run(['gateway', 'templates', 'sync', 'wa']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Read 130 templates of wa from Meta/);
    expect(graph.requests.filter((q) => q.method === 'GET')).toHaveLength(2);
    expect(r.stdout + r.stderr).not.toContain(TOKEN);

    const list = await run(['gateway', 'templates', 'list', 'wa', '--status', 'paused']);
    expect(list.stdout).toMatch(/tpl_007\s+en_US\s+PAUSED\s+utility\s+header image, body 2/);
    expect(list.stdout).toMatch(/Read from Meta \d{4}-\d\d-\d\d/);
    const all = await json(['gateway', 'templates', 'list', 'wa']);
    expect(all.data).toHaveLength(130);
    expect(all.data[0]).toMatchObject({ name: 'tpl_000', category: 'marketing', parameters: { body: ['1', '2'] } });
    expect(await doctorCheck()).toBeUndefined();
  });

  it('a failed sync keeps the catalogue and says why', async () => {
    graph.setCatalogue(WABA, 'rotated-token', []);
    const r = await run(['gateway', 'templates', 'sync', 'wa']);
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(/could not read the template catalogue of wa: HTTP 401, Graph error 190/);
    expect((await json(['gateway', 'templates', 'list', 'wa'])).data).toHaveLength(130);
  });

  it('refuses a gateway of another kind', async () => {
    await json(['gateway', 'add', 'sandbox', '--name', 'demo']);
    const r = await run(['gateway', 'templates', 'list', 'demo']);
    expect(r.code).toBe(1);
    expect(oneErrorLine(r.stderr)).toMatch(/demo is a sandbox gateway: only WhatsApp Cloud gateways have templates/);
  });
});

describe('msgctl price set --category', () => {
  it('sets, lists and unsets a price per template category, default and per partner', async () => {
    const set = await run(['price', 'set', 'whatsapp', '0.004', '--category', 'utility', '--partner', 'acme']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toMatch(/utility whatsapp templates now cost .*0\.004.* for acme/);
    expect(set.stdout).toMatch(/free/);
    await json(['price', 'set', 'whatsapp', '0.025', '--category', 'marketing']);
    await json(['price', 'set', 'whatsapp', '0.05']);
    const list = await json(['price', 'list']);
    expect(list.data.map((p: any) => [p.channel, p.category, p.partner])).toEqual(
      expect.arrayContaining([
        ['whatsapp', null, null],
        ['whatsapp', 'marketing', null],
        ['whatsapp', 'utility', 'acme'],
      ]),
    );
    const rows = await s.withCtx((ctx) =>
      ctx.store.all(sql`SELECT category, amount FROM prices WHERE channel_type = 'whatsapp' ORDER BY category`),
    );
    expect(rows).toEqual([
      { category: '', amount: 50_000 },
      { category: 'marketing', amount: 25_000 },
      { category: 'utility', amount: 4_000 },
    ]);
    const unset = await run(['price', 'unset', 'whatsapp', '--category', 'marketing']);
    expect(unset.stdout).toMatch(/Removed the marketing template price/);
  });

  it('refuses a category on another channel, and an unknown one', async () => {
    const sms = await run(['price', 'set', 'sms', '0.01', '--category', 'marketing']);
    expect(sms.code).toBe(1);
    expect(oneErrorLine(sms.stderr)).toMatch(/a price per category is for WhatsApp templates only/);
    const bad = await run(['price', 'set', 'whatsapp', '0.01', '--category', 'promo']);
    expect(oneErrorLine(bad.stderr)).toMatch(/unknown template category "promo".*marketing, utility, authentication/);
  });
});
