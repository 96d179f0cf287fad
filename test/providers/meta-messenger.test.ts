import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { metaMessengerAdapter as messenger } from '../../src/providers/meta-messenger/send.js';
import { instagramBase, metaInstagramAdapter as instagram } from '../../src/providers/meta-instagram/send.js';
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { pinConnection } from '../../src/db/pin.js';
import { metaInstagramSettings } from '../../src/providers/meta-instagram/kind.js';
import { startGraphFake, type GraphFake } from '../fakes/graph.js';
import { makeCtx, makeGw, makeMsg, newDispatcher, text } from './helpers.js';

const PAGE_ID = '682498302938465';
const PAGE_TOKEN = 'EAApagetoken';
const IG_ID = '17841400000000001';
const IG_TOKEN = 'IGQVtoken';
const dispatcher = newDispatcher();
const ctx = makeCtx(dispatcher);
let fake: GraphFake;

const pageGw = (extra: Record<string, unknown> = {}, token = PAGE_TOKEN) =>
  makeGw(
    'meta_messenger',
    { base_url: fake.url, api_version: 'v19.0', page_id: PAGE_ID, ...extra },
    { page_access_token: token },
  );
const psidMsg = (to = 'PSID_1') => makeMsg('messenger', to, PAGE_ID, text('hello, world'));

beforeAll(async () => {
  fake = await startGraphFake({
    accounts: [
      { id: PAGE_ID, kind: 'page', token: PAGE_TOKEN },
      { id: IG_ID, kind: 'instagram', token: IG_TOKEN },
    ],
  });
});
afterAll(async () => {
  await fake.close();
  await dispatcher.close();
});
beforeEach(() => fake.reset());

describe('meta_messenger adapter', () => {
  it('posts to the page Send API and returns message_id', async () => {
    const r = await messenger.send(pageGw(), psidMsg(), ctx);
    const req = fake.last()!;
    expect(req.path).toBe(`/v19.0/${PAGE_ID}/messages`);
    expect(req.headers.authorization).toBe(`Bearer ${PAGE_TOKEN}`);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.body).toEqual({
      recipient: { id: 'PSID_1' },
      messaging_type: 'RESPONSE',
      message: { text: 'hello, world' },
    });
    const answered = JSON.parse(req.reply!.body);
    expect(answered).toEqual({ recipient_id: 'PSID_1', message_id: expect.stringMatching(/^m_/) });
    expect(r).toEqual({ outcome: 'accepted', providerMessageId: answered.message_id });
  });

  it('adds the tag for MESSAGE_TAG sends', async () => {
    const r = await messenger.send(pageGw({ messaging_type: 'MESSAGE_TAG', tag: 'HUMAN_AGENT' }), psidMsg(), ctx);
    expect(fake.last()!.body).toMatchObject({ messaging_type: 'MESSAGE_TAG', tag: 'HUMAN_AGENT' });
    expect(r.outcome).toBe('accepted');
  });

  it('fails outside the 24 h window (code 10 / 2018278) and for unavailable people (551)', async () => {
    fake.failFor('PSID_OLD', { kind: 'error', code: 10 });
    fake.failFor('PSID_GONE', { kind: 'error', code: 551 });
    const old = await messenger.send(pageGw(), psidMsg('PSID_OLD'), ctx);
    const gone = await messenger.send(pageGw(), psidMsg('PSID_GONE'), ctx);
    expect(old).toMatchObject({ outcome: 'failed', code: '10' });
    expect(old.outcome === 'failed' && old.message).toContain('2018278');
    expect(gone).toMatchObject({ outcome: 'failed', code: '551' });
  });

  it('retries page rate limits (613, HTTP 429) and 5xx', async () => {
    fake.failNext({ kind: 'rate_limit' });
    fake.failNext({ kind: 'status', status: 429, headers: { 'retry-after': '2' } });
    fake.failNext({ kind: 'status', status: 502 });
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await messenger.send(pageGw(), psidMsg(), ctx));
    expect(results[0]).toMatchObject({ outcome: 'retry', code: '613', retryAfterMs: 5000 });
    expect(results[1]).toMatchObject({ outcome: 'retry', retryAfterMs: 2000 });
    expect(results[2]).toMatchObject({ outcome: 'retry' });
  });

  it('retries a timeout and a reset, fails a bad token', async () => {
    fake.failNext({ kind: 'timeout' });
    fake.failNext({ kind: 'reset' });
    const t = await messenger.send(pageGw(), psidMsg(), makeCtx(dispatcher, { timeoutMs: 150 }));
    const reset = await messenger.send(pageGw(), psidMsg(), ctx);
    const auth = await messenger.send(pageGw({}, 'stale'), psidMsg(), ctx);
    expect(t).toMatchObject({ outcome: 'retry', code: 'timeout' });
    expect(reset).toMatchObject({ outcome: 'retry', code: 'network_error' });
    expect(auth).toMatchObject({ outcome: 'failed', code: '190' });
  });
});

describe('meta_instagram adapter', () => {
  const igGw = (extra: Record<string, unknown> = {}, token = IG_TOKEN) =>
    makeGw(
      'meta_instagram',
      { base_url: fake.url, api_version: 'v21.0', ig_account_id: IG_ID, ...extra },
      { access_token: token },
    );

  it('sends as the IG account (Instagram Login flow), with the Send API body and messaging_type RESPONSE', async () => {
    const r = await instagram.send(igGw(), makeMsg('instagram', 'IGSID_9', IG_ID, text('hi')), ctx);
    const req = fake.last()!;
    expect(req.path).toBe(`/v21.0/${IG_ID}/messages`);
    expect(req.headers.authorization).toBe(`Bearer ${IG_TOKEN}`);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.body).toEqual({ recipient: { id: 'IGSID_9' }, messaging_type: 'RESPONSE', message: { text: 'hi' } });
    expect(r).toEqual({ outcome: 'accepted', providerMessageId: JSON.parse(req.reply!.body).message_id });
  });

  it('sends a tagged message (HUMAN_AGENT) when the gateway says so, and refuses MESSAGE_TAG without a tag', async () => {
    const settings = metaInstagramSettings.parse({
      base_url: fake.url,
      ig_account_id: IG_ID,
      messaging_type: 'MESSAGE_TAG',
      tag: 'HUMAN_AGENT',
    });
    const r = await instagram.send(
      makeGw('meta_instagram', settings, { access_token: IG_TOKEN }),
      makeMsg('instagram', 'IGSID_9', IG_ID, text('hi')),
      ctx,
    );
    expect(r.outcome).toBe('accepted');
    expect(fake.last()!.body).toEqual({
      recipient: { id: 'IGSID_9' },
      messaging_type: 'MESSAGE_TAG',
      tag: 'HUMAN_AGENT',
      message: { text: 'hi' },
    });
    const bad = metaInstagramSettings.safeParse({
      ig_account_id: IG_ID,
      messaging_type: 'MESSAGE_TAG',
    });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues[0]).toMatchObject({ path: ['tag'] });
  });

  it('sends through the linked page when page_id is set (Facebook Login flow)', async () => {
    const r = await instagram.send(
      igGw({ page_id: PAGE_ID }, PAGE_TOKEN),
      makeMsg('instagram', 'IGSID_9', IG_ID, text('hi')),
      ctx,
    );
    expect(fake.last()!.path).toBe(`/v21.0/${PAGE_ID}/messages`);
    expect(r.outcome).toBe('accepted');
  });

  it('defaults to graph.instagram.com without a page (Instagram Login), graph.facebook.com with one (FACTS B1)', () => {
    const stored = (settings: Record<string, unknown>) => metaInstagramSettings.parse(settings);
    expect(stored({ ig_account_id: IG_ID })).not.toHaveProperty('base_url');
    expect(instagramBase(stored({ ig_account_id: IG_ID }))).toBe('https://graph.instagram.com');
    expect(instagramBase(stored({ ig_account_id: IG_ID, page_id: PAGE_ID }))).toBe('https://graph.facebook.com');
    expect(instagramBase(stored({ ig_account_id: IG_ID, base_url: 'https://proxy.example.com/' }))).toBe(
      'https://proxy.example.com',
    );
  });

  it('the 0004 migration drops the old graph.facebook.com default from Instagram Login gateways only', () => {
    const db = pinConnection(new Database(':memory:'));
    db.exec('CREATE TABLE gateways (id TEXT PRIMARY KEY, kind TEXT, settings TEXT)');
    const put = db.prepare('INSERT INTO gateways VALUES (?, ?, ?)');
    put.run(
      'ig_login',
      'meta_instagram',
      JSON.stringify({ base_url: 'https://graph.facebook.com', ig_account_id: IG_ID }),
    );
    put.run(
      'ig_page',
      'meta_instagram',
      JSON.stringify({ base_url: 'https://graph.facebook.com', ig_account_id: IG_ID, page_id: PAGE_ID }),
    );
    put.run(
      'ig_proxy',
      'meta_instagram',
      JSON.stringify({ base_url: 'https://proxy.example.com', ig_account_id: IG_ID }),
    );
    put.run('fb', 'meta_messenger', JSON.stringify({ base_url: 'https://graph.facebook.com', page_id: PAGE_ID }));
    db.exec(readFileSync(new URL('../../migrations/0004_instagram_login_base.sql', import.meta.url), 'utf8'));
    const base = (id: string) =>
      JSON.parse((db.prepare('SELECT settings FROM gateways WHERE id = ?').get(id) as { settings: string }).settings)
        .base_url;
    expect([base('ig_login'), base('ig_page'), base('ig_proxy'), base('fb')]).toEqual([
      undefined,
      'https://graph.facebook.com',
      'https://proxy.example.com',
      'https://graph.facebook.com',
    ]);
    db.close();
  });

  it('classifies Graph errors like Messenger', async () => {
    fake.failNext({ kind: 'error', code: 100, subcode: 2018001, message: '(#100) No matching user found' });
    fake.failNext({ kind: 'error', code: 4 });
    const none = await instagram.send(igGw(), makeMsg('instagram', 'IGSID_X', IG_ID, text('hi')), ctx);
    const limited = await instagram.send(igGw(), makeMsg('instagram', 'IGSID_X', IG_ID, text('hi')), ctx);
    expect(none).toMatchObject({ outcome: 'failed', code: '100' });
    expect(none.outcome === 'failed' && none.message).toContain('No matching user found');
    expect(limited).toMatchObject({ outcome: 'retry', code: '4' });
  });
});
