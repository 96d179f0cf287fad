import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type CatalogueTemplate,
  listTemplates,
  partnerTemplates,
  recordSyncFailure,
  storeCatalogue,
  templateJson,
  templateSync,
} from '../../src/core/whatsapp-templates.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { partner } from './read-fixtures.js';

// The WhatsApp template catalogue on both stores: a sync stores Meta's list whole (new, changed
// and deleted templates), a failed sync keeps the last good catalogue and says why, and the
// catalogue reads back for msgctl, /v1/templates and the console, filtered and paged.

const T0 = Date.UTC(2026, 0, 1);

function tpl(name: string, language: string, status: string, body: string[] = []): CatalogueTemplate {
  return {
    metaId: `meta_${name}_${language}`,
    name,
    language,
    status,
    category: 'UTILITY',
    components: [{ type: 'BODY', text: body.map((n) => `{{${n}}}`).join(' ') }],
    spec: { format: 'positional', header: null, body, buttons: [] },
  };
}

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  t.clock.now = T0;
  await partner(t, 'p1');
  await partner(t, 'p2');
  await t.exec(`INSERT INTO gateways (id, kind, name, secrets, status, created_at, updated_at) VALUES
    ('gw_wa', 'whatsapp_cloud', 'wa', '', 'active', 0, 0), ('gw_wb', 'whatsapp_cloud', 'wb', '', 'active', 0, 0)`);
  await t.exec(`INSERT INTO channels (id, partner_id, gateway_id, type, sender, status, position, created_at, updated_at) VALUES
    ('ch_1', 'p1', 'gw_wa', 'whatsapp', '+15550000001', 'active', 0, 0, 0),
    ('ch_2', 'p2', 'gw_wb', 'whatsapp', '+15550000002', 'removed', 0, 0, 0)`);
});
afterEach(() => t.close());

const names = (rows: { name: string; language: string; status: string }[]) =>
  rows.map((r) => `${r.name}/${r.language}/${r.status}`).sort();

describe('whatsapp templates', () => {
  it('stores a catalogue and reads it back as msgctl and /v1/templates show it', async () => {
    expect(await templateSync(t.ctx, 'gw_wa')).toBeNull();
    const n = await storeCatalogue(t.ctx, 'gw_wa', [
      tpl('order_ready', 'en-US', 'approved', ['1']),
      tpl('order_ready', 'de', 'APPROVED'),
      tpl('promo', 'en_US', 'PENDING'),
    ]);
    expect(n).toBe(3);
    expect(await templateSync(t.ctx, 'gw_wa')).toEqual({
      gateway_id: 'gw_wa',
      synced_at: T0,
      templates: 3,
      attempted_at: T0,
      error: null,
    });
    const rows = await listTemplates(t.ctx, ['gw_wa'], {});
    expect(names(rows)).toEqual(['order_ready/de/APPROVED', 'order_ready/en_US/APPROVED', 'promo/en_US/PENDING']);
    const ready = rows.find((r) => r.name === 'order_ready' && r.language === 'en_US')!;
    expect(templateJson(ready)).toMatchObject({
      name: 'order_ready',
      language: 'en_US',
      status: 'APPROVED',
      category: 'utility',
      parameter_format: 'positional',
      parameters: { header: null, body: ['1'], buttons: [], checked: true },
      components: [{ type: 'BODY', text: '{{1}}' }],
      synced_at: new Date(T0).toISOString(),
    });
  });

  it('a later sync updates changed templates, adds new ones and drops those Meta deleted', async () => {
    await storeCatalogue(t.ctx, 'gw_wa', [tpl('a', 'en_US', 'PENDING'), tpl('b', 'en_US', 'APPROVED')]);
    const before = await listTemplates(t.ctx, ['gw_wa'], { name: 'a' });
    t.clock.now = T0 + 60_000;
    await storeCatalogue(t.ctx, 'gw_wa', [tpl('a', 'en_US', 'APPROVED', ['1', '2']), tpl('c', 'en_US', 'REJECTED')]);
    const rows = await listTemplates(t.ctx, ['gw_wa'], {});
    expect(names(rows)).toEqual(['a/en_US/APPROVED', 'c/en_US/REJECTED']);
    const a = rows.find((r) => r.name === 'a')!;
    // The same row, updated in place: its id (the /v1 cursor) stays.
    expect(a.id).toBe(before[0].id);
    expect(templateJson(a).parameters.body).toEqual(['1', '2']);
    expect(a.updated_at).toBe(T0 + 60_000);
    expect((await templateSync(t.ctx, 'gw_wa'))?.templates).toBe(2);
  });

  it('a failed sync keeps the last good catalogue and records why', async () => {
    await recordSyncFailure(t.ctx, 'gw_wa', 'Meta said 190: the access token expired');
    expect(await templateSync(t.ctx, 'gw_wa')).toMatchObject({
      synced_at: null,
      templates: 0,
      error: 'Meta said 190: the access token expired',
    });
    await storeCatalogue(t.ctx, 'gw_wa', [tpl('a', 'en_US', 'APPROVED')]);
    t.clock.now = T0 + 5000;
    await recordSyncFailure(t.ctx, 'gw_wa', 'x'.repeat(2000));
    const s = await templateSync(t.ctx, 'gw_wa');
    expect(s).toMatchObject({ synced_at: T0, templates: 1, attempted_at: T0 + 5000 });
    expect(s?.error).toHaveLength(1000);
    expect(names(await listTemplates(t.ctx, ['gw_wa'], {}))).toEqual(['a/en_US/APPROVED']);
    // The next good sync clears the error.
    await storeCatalogue(t.ctx, 'gw_wa', [tpl('a', 'en_US', 'APPROVED')]);
    expect((await templateSync(t.ctx, 'gw_wa'))?.error).toBeNull();
  });

  it('filters by name, language, status and category, and pages on id', async () => {
    await storeCatalogue(t.ctx, 'gw_wa', [
      tpl('a', 'en_US', 'APPROVED'),
      tpl('a', 'de', 'APPROVED'),
      tpl('b', 'en_US', 'PAUSED'),
      tpl('c', 'en_US', 'APPROVED'),
    ]);
    await storeCatalogue(t.ctx, 'gw_wb', [tpl('z', 'en_US', 'APPROVED')]);
    expect(names(await listTemplates(t.ctx, ['gw_wa'], { name: 'a' }))).toEqual(['a/de/APPROVED', 'a/en_US/APPROVED']);
    expect(names(await listTemplates(t.ctx, ['gw_wa'], { language: 'en-US', status: 'approved' }))).toEqual([
      'a/en_US/APPROVED',
      'c/en_US/APPROVED',
    ]);
    expect(await listTemplates(t.ctx, ['gw_wa'], { category: 'MARKETING' })).toEqual([]);
    expect(await listTemplates(t.ctx, ['gw_wa'], { category: 'Utility' })).toHaveLength(4);
    expect(names(await listTemplates(t.ctx, ['gw_wa', 'gw_wb'], { status: 'APPROVED' }))).toHaveLength(4);
    expect(await listTemplates(t.ctx, [], {})).toEqual([]);

    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await listTemplates(t.ctx, ['gw_wa'], {}, { after, limit: 3 });
      seen.push(...page.slice(0, 2).map((r) => r.id));
      if (page.length <= 2) break;
      after = page[1].id;
    }
    const all = (await listTemplates(t.ctx, ['gw_wa'], {})).map((r) => r.id);
    expect(seen).toEqual(all);
    expect([...all].sort()).toEqual(all);
  });

  it('gives a partner the templates of its active WhatsApp channel’s gateway only', async () => {
    await storeCatalogue(t.ctx, 'gw_wa', [tpl('a', 'en_US', 'APPROVED')]);
    await storeCatalogue(t.ctx, 'gw_wb', [tpl('z', 'en_US', 'APPROVED')]);
    expect(names(await partnerTemplates(t.ctx, 'p1', {}))).toEqual(['a/en_US/APPROVED']);
    // p2's WhatsApp channel was removed: no catalogue is its.
    expect(await partnerTemplates(t.ctx, 'p2', {})).toEqual([]);
    expect(await partnerTemplates(t.ctx, 'p1', { status: 'PAUSED' })).toEqual([]);
  });
});
