import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { addGateway } from '../../src/core/gateways.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { cleanupDirs, flat, newDataDir, openConsole, type Console } from './helpers.js';

// The gateways screen reads a WhatsApp gateway's templates from Meta on `t` (a fake Graph API
// here), says how it went in the flash line, and shows the catalogue's state in the detail pane.

const WABA = '102290129340398';
const TOKEN = 'EAA-tui-token';
let graph: GraphFake;
let c: Console | null = null;

beforeAll(async () => {
  graph = await startGraphFake();
  graph.setCatalogue(
    WABA,
    TOKEN,
    ['a', 'b', 'c'].map((n, i) => ({
      id: String(i + 1),
      name: `tpl_${n}`,
      language: 'en_US',
      status: 'APPROVED',
      category: 'UTILITY',
      components: [{ type: 'BODY', text: 'Hi {{1}}' }],
    })),
  );
});
afterEach(() => {
  c?.close();
  c = null;
});
afterAll(async () => {
  await graph.close();
  await cleanupDirs();
});

describe('gateways screen: t reads the templates', () => {
  it('reads them from Meta and shows how many and when; a failed read says why', async () => {
    c = await openConsole(await newDataDir(), 'gateways');
    await addGateway(
      c.cli.ctx,
      {
        kind: 'whatsapp_cloud',
        name: 'wa',
        settings: { base_url: graph.url, phone_number_id: '106540352242922', waba_id: WABA },
        secrets: { access_token: TOKEN },
      },
      'test',
    );
    let f = flat(await c.see('wa · Meta WhatsApp Cloud API'));
    expect(f).toContain('templates: never read (t reads)');
    await c.press('t');
    f = flat(await c.see('Read 3 templates of wa from Meta.'));
    await c.see(/templates: 3, read \d{4}-\d\d-\d\d/);
    expect(graph.requests.filter((r) => r.method === 'GET')).toHaveLength(1);

    graph.setCatalogue(WABA, 'another-token', []);
    await c.press('t');
    f = flat(await c.see('Could not read the templates of wa'));
    expect(f).toMatch(/HTTP 401, Graph error 190.*The last ones read stay in force/);
    expect(f).not.toContain(TOKEN);
  });

  it('says a gateway of another kind has none', async () => {
    c = await openConsole(await newDataDir(), 'gateways');
    await addGateway(c.cli.ctx, { kind: 'sandbox', name: 'sbx', settings: {} }, 'test');
    await c.see('sbx · Sandbox');
    await c.press('t');
    await c.see('sbx is a sandbox gateway: only WhatsApp Cloud gateways have templates.');
  });
});
