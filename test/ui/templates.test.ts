import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyTemplateChangeIn } from '../../src/core/whatsapp-templates.js';
import { syncGatewayTemplates } from '../../src/jobs/template-sync.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { sqlRow } from '../helpers/rows.js';
import { waitFor } from '../helpers/wait.js';
import {
  axeViolations,
  freshPage,
  h1,
  launchBrowser,
  loggedIn,
  mainText,
  userSession,
  type TestBrowser,
} from './helpers.js';

// The console's Templates page in a real browser: the partner's WhatsApp templates with status,
// category and what a send gives, filtered through the form, paged, escaped, and only for the
// roles that send.

const WABA = '102290129340398';
const TOKEN = 'EAA-ui-token';

let s: TestServer;
let b: TestBrowser;
let graph: GraphFake;
let acme: Awaited<ReturnType<typeof setupPartner>>;
let gatewayId: string;

beforeAll(async () => {
  graph = await startGraphFake();
  graph.setCatalogue(WABA, TOKEN, [
    {
      id: '1',
      name: 'order_update',
      language: 'en_US',
      status: 'APPROVED',
      category: 'UTILITY',
      components: [
        { type: 'HEADER', format: 'IMAGE' },
        { type: 'BODY', text: 'Hi {{1}}, order {{2}}' },
        { type: 'BUTTONS', buttons: [{ type: 'URL', text: 'Track', url: 'https://t.example/{{1}}' }] },
      ],
    },
    {
      id: '2',
      name: 'new_arrivals',
      language: 'en_US',
      status: 'PAUSED',
      category: 'MARKETING',
      components: [{ type: 'BODY', text: 'New in' }],
    },
    ...Array.from({ length: 55 }, (_, i) => ({
      id: String(100 + i),
      name: `promo_${String(i).padStart(2, '0')}`,
      language: 'de',
      status: 'APPROVED',
      category: 'MARKETING',
      components: [{ type: 'BODY', text: 'Hallo {{1}}' }],
    })),
  ]);
  s = await startTestServer({ 'log.level': 'warn' });
  // The sync msgd runs on start done first, so it does not drop the template added below.
  await waitFor(
    async () =>
      (await sqlRow(s.ctx, "SELECT 1 FROM cron_runs WHERE key LIKE 'whatsapp-templates-sync:%'")) !== undefined &&
      (await sqlRow(s.ctx, "SELECT 1 FROM jobs WHERE kind = 'maintenance.whatsapp-templates-sync'")) === undefined,
    'the sync on start',
    10_000,
  );
  acme = await setupPartner(s.ctx, { slug: 'acme', balance: '10.00' });
  gatewayId = (
    await connect(
      s.ctx,
      acme.partnerId,
      {
        kind: 'whatsapp_cloud',
        settings: { base_url: graph.url, phone_number_id: '106540352242922', waba_id: WABA },
        secrets: { access_token: TOKEN, app_secret: 'app-secret' },
      },
      'whatsapp',
      '+15550783881',
    )
  ).gateway.id;
  await syncGatewayTemplates({ ctx: s.ctx, dispatcher: s.rt.dispatcher, timeoutMs: 5000 }, gatewayId);
  // A name Meta would never allow, as a webhook could still carry it: shown as text, never markup.
  await s.ctx.store.transaction((tx) =>
    applyTemplateChangeIn(
      tx,
      s.ctx,
      {
        account: { kind: 'whatsapp_cloud', setting: 'waba_id', value: WABA },
        metaId: '999',
        name: '<img src=x onerror="window.pwned=1">',
        language: 'en_US',
        status: 'APPROVED',
        category: 'utility',
        at: Date.now(),
      },
      () => true,
    ),
  );
  b = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await b?.close();
  await s?.stop();
  await graph?.close();
});

describe('the Templates page', () => {
  it('lists the templates with what a send gives, filters through the form, pages, and escapes', async () => {
    const page = await freshPage(b);
    await userSession(page, s.ctx, s.url, acme.partnerId, 'developer');
    await page.goto(`${s.url}/ui/overview`);
    await Promise.all([page.waitForNavigation(), page.click('nav a[href="/ui/templates"]')]);
    expect(await h1(page)).toBe('Templates');
    expect(await page.$eval('nav a[aria-current="page"]', (e) => e.textContent)).toBe('Templates');
    const rows = await page.$$eval('tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
    );
    expect(rows).toHaveLength(50);
    expect(rows).toContainEqual([
      'order_update',
      'en_US',
      'APPROVED',
      'utility',
      'header: one image; body: {{1}}, {{2}}; url button 0: 1 parameter',
      expect.any(String),
    ]);
    expect(await axeViolations(page)).toEqual([]);

    // The next page has the rest, no row twice.
    await Promise.all([page.waitForNavigation(), page.click('.pager a')]);
    const more = await page.$$eval('tbody tr td:first-child', (tds) => tds.map((td) => td.textContent));
    expect(more.length).toBe(58 - 50);
    expect(more.filter((n) => rows.some((r) => r[0] === n))).toEqual([]);
    // The template added by webhook last, with a name that is markup: shown as text.
    expect(await mainText(page)).toContain('<img src=x onerror="window.pwned=1">');
    expect(await page.evaluate(() => (window as any).pwned)).toBeUndefined();

    // Filter by status through the form.
    await page.goto(`${s.url}/ui/templates`);
    await page.select('#f-status', 'PAUSED');
    await Promise.all([page.waitForNavigation(), page.click('form.filters button')]);
    expect(page.url()).toContain('status=PAUSED');
    expect(await page.$$eval('tbody tr td:first-child', (tds) => tds.map((td) => td.textContent))).toEqual([
      'new_arrivals',
    ]);
    await page.browserContext().close();
  });

  it('is not shown to billing users, and says when nothing was read yet', async () => {
    const { client: billing } = await loggedIn(s.ctx, s.url, acme.partnerId, 'billing');
    const r = await billing.get('/ui/templates');
    expect(r.status).toBe(403);
    expect((await billing.get('/ui/overview')).text).not.toContain('/ui/templates');
    const other = await setupPartner(s.ctx, { slug: 'other' });
    const { client } = await loggedIn(s.ctx, s.url, other.partnerId, 'admin');
    const empty = await client.get('/ui/templates');
    expect(empty.status).toBe(200);
    expect(empty.text).toContain('No templates match');
  });
});
