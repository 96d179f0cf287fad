import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../src/core/audit.js';
import {
  MAX_ENDPOINTS_PER_PARTNER,
  createEndpoint,
  deleteEndpoint,
  disableEndpointIn,
  enableEndpoint,
  endpointHealthCounts,
  endpointJson,
  findEndpointRef,
  getEndpoint,
  getEndpointAny,
  listAllEndpoints,
  listEndpoints,
  openSecrets,
  rotateSecret,
  updateEndpoint,
} from '../../src/core/endpoints.js';
import { sql } from '../../src/db/sql.js';
import { insertPartner } from './fixtures.js';
import { openStoreCtx, type StoreCtx } from './helpers.js';
import { raceOnRow } from './race.js';

// Partner webhook endpoints on both stores: what a partner registers, sees, changes and
// deletes, the signing secret shown once, the limit per partner, the operator's enable and
// the races two requests at once could lose.

const HOUR = 3_600_000;

let t: StoreCtx;
beforeEach(async () => {
  t = await openStoreCtx({ clock: true });
  await insertPartner(t, { id: 'prt_a', slug: 'acme' });
  await insertPartner(t, { id: 'prt_b', slug: 'bravo' });
});
afterEach(() => t.close());

const create = (url: string, partner = 'prt_a', events: ('message.sent' | 'message.failed')[] | null = null) =>
  createEndpoint(t.ctx, partner, { url, events, description: null });

describe('webhook endpoints', () => {
  it('registers an endpoint and shows its secret once: never in its JSON, the list or the audit log', async () => {
    const { endpoint, secret } = await createEndpoint(t.ctx, 'prt_a', {
      url: 'https://a.example/hook',
      events: ['message.sent', 'message.failed', 'message.sent'],
      description: 'prod',
    });
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const stored = (await getEndpoint(t.ctx, 'prt_a', endpoint.id))!;
    expect(stored).toEqual(endpoint);
    expect(stored.secret).not.toContain(secret.slice(6));
    expect(openSecrets(t.ctx, stored)).toEqual({ current: secret, previous: null });
    const json = endpointJson(stored, t.clock.now);
    expect(json).toMatchObject({
      url: 'https://a.example/hook',
      description: 'prod',
      events: ['message.failed', 'message.sent'],
      status: 'enabled',
      secret_rotation_ends_at: null,
    });
    const everything = JSON.stringify([
      json,
      await listEndpoints(t.ctx, 'prt_a', { limit: 10 }),
      await listAudit(t.ctx),
    ]);
    expect(everything).not.toContain(secret);
    expect(everything).not.toContain(secret.slice(6));
    expect((await listAudit(t.ctx))[0]).toMatchObject({ action: 'webhook.create', target_id: endpoint.id });
  });

  it("lists a partner's own live endpoints, newest first, page by page", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push((await create(`https://a.example/${i}`)).endpoint.id);
      t.clock.now += 1;
    }
    await create('https://b.example/hook', 'prt_b');
    await deleteEndpoint(t.ctx, 'prt_a', ids[2]);
    const first = await listEndpoints(t.ctx, 'prt_a', { limit: 2 });
    expect(first.map((e) => e.id)).toEqual([ids[4], ids[3]]);
    const second = await listEndpoints(t.ctx, 'prt_a', { limit: 2, before: ids[3] });
    expect(second.map((e) => e.id)).toEqual([ids[1], ids[0]]);
    expect(await listEndpoints(t.ctx, 'prt_a', { limit: 2, before: ids[0] })).toEqual([]);
    // Another partner's endpoint is not found by id, nor by a partner it is not theirs.
    expect(await getEndpoint(t.ctx, 'prt_b', ids[0])).toBeUndefined();
    expect(await getEndpoint(t.ctx, 'prt_a', ids[2])).toBeUndefined();
    const all = await listAllEndpoints(t.ctx);
    expect(all.map((e) => [e.partner_slug, e.url])).toEqual([
      ['acme', 'https://a.example/0'],
      ['acme', 'https://a.example/1'],
      ['acme', 'https://a.example/3'],
      ['acme', 'https://a.example/4'],
      ['bravo', 'https://b.example/hook'],
    ]);
    expect((await listAllEndpoints(t.ctx, 'prt_b')).map((e) => e.url)).toEqual(['https://b.example/hook']);
  });

  it(`refuses a partner's endpoint beyond ${MAX_ENDPOINTS_PER_PARTNER}, counting live ones only`, async () => {
    const first = await create('https://a.example/0');
    for (let i = 1; i < MAX_ENDPOINTS_PER_PARTNER; i++) await create(`https://a.example/${i}`);
    await expect(create('https://a.example/one-more')).rejects.toMatchObject({
      code: 'conflict',
      message: `a partner may have at most ${MAX_ENDPOINTS_PER_PARTNER} webhook endpoints; delete one first`,
    });
    // Another partner is not held back; a deleted endpoint frees its place.
    await create('https://b.example/hook', 'prt_b');
    await deleteEndpoint(t.ctx, 'prt_a', first.endpoint.id);
    await create('https://a.example/one-more');
    expect(await listEndpoints(t.ctx, 'prt_a', { limit: 100 })).toHaveLength(MAX_ENDPOINTS_PER_PARTNER);
  });

  it('of two registrations racing for the last place, one gets it and the other is refused', async () => {
    for (let i = 0; i < MAX_ENDPOINTS_PER_PARTNER - 1; i++) await create(`https://a.example/${i}`);
    const outcomes = await raceOnRow(t, sql`SELECT id FROM partners WHERE id = 'prt_a' FOR UPDATE`, [
      () => create('https://a.example/x'),
      () => create('https://a.example/y'),
    ]);
    expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(outcomes.find((o) => o.status === 'rejected')).toMatchObject({ reason: { code: 'conflict' } });
    expect(await listEndpoints(t.ctx, 'prt_a', { limit: 100 })).toHaveLength(MAX_ENDPOINTS_PER_PARTNER);
  });

  it('changes the URL, events and description, keeping the secret; audits the URL it had', async () => {
    const { endpoint, secret } = await create('https://a.example/old', 'prt_a', ['message.sent']);
    t.clock.now += 1000;
    const next = await updateEndpoint(t.ctx, 'prt_a', endpoint.id, {
      url: 'https://a.example/new',
      events: null,
      description: 'moved',
    });
    expect(next).toMatchObject({ url: 'https://a.example/new', events: null, description: 'moved' });
    expect(next.updated_at).toBe(endpoint.updated_at + 1000);
    const stored = (await getEndpoint(t.ctx, 'prt_a', endpoint.id))!;
    expect(stored).toEqual(next);
    expect(openSecrets(t.ctx, stored).current).toBe(secret);
    expect((await listAudit(t.ctx))[0]).toMatchObject({
      action: 'webhook.update',
      details: { url: 'https://a.example/new', events: null, previous_url: 'https://a.example/old' },
    });
    // The settings version moves even when the clock does not.
    const again = await updateEndpoint(t.ctx, 'prt_a', endpoint.id, { url: 'https://a.example/new' });
    expect(again.updated_at).toBe(next.updated_at + 1);
    await expect(updateEndpoint(t.ctx, 'prt_b', endpoint.id, { url: 'https://b.example/' })).rejects.toMatchObject({
      code: 'not_found',
    });
  });

  it('deletes an endpoint once, cancelling its waiting deliveries and keeping the finished ones', async () => {
    const { endpoint } = await create('https://a.example/hook');
    await t.exec(`
      INSERT INTO events (id, partner_id, type, payload, fanned_out, created_at) VALUES
        ('evt_1', 'prt_a', 'message.sent', '{}', 1, 1), ('evt_2', 'prt_a', 'message.sent', '{}', 1, 2);
      INSERT INTO webhook_deliveries (id, event_id, endpoint_id, partner_id, status, attempts, created_at, updated_at) VALUES
        ('dlv_1', 'evt_1', '${endpoint.id}', 'prt_a', 'succeeded', 1, 1, 1),
        ('dlv_2', 'evt_2', '${endpoint.id}', 'prt_a', 'pending', 1, 2, 2);`);
    expect(await deleteEndpoint(t.ctx, 'prt_b', endpoint.id)).toBe(false);
    expect(await deleteEndpoint(t.ctx, 'prt_a', endpoint.id)).toBe(true);
    expect(await deleteEndpoint(t.ctx, 'prt_a', endpoint.id)).toBe(false);
    const rows = await t.ctx.store.all<{ id: string; status: string; last_error: string | null }>(
      sql`SELECT id, status, last_error FROM webhook_deliveries ORDER BY id`,
    );
    expect(rows).toEqual([
      { id: 'dlv_1', status: 'succeeded', last_error: null },
      { id: 'dlv_2', status: 'cancelled', last_error: 'endpoint deleted' },
    ]);
    expect(await getEndpointAny(t.ctx, endpoint.id)).toMatchObject({ status: 'disabled', disabled_reason: 'deleted' });
    expect(await listEndpoints(t.ctx, 'prt_a', { limit: 10 })).toEqual([]);
  });

  it('rotates the secret: the new one shown once, the old one signing beside it until the grace ends', async () => {
    const { endpoint, secret: old } = await create('https://a.example/hook');
    const { endpoint: rotated, secret } = await rotateSecret(t.ctx, 'prt_a', endpoint.id, 24 * HOUR);
    expect(secret).not.toBe(old);
    const stored = (await getEndpoint(t.ctx, 'prt_a', endpoint.id))!;
    expect(stored).toEqual(rotated);
    expect(openSecrets(t.ctx, stored)).toEqual({ current: secret, previous: old });
    expect(endpointJson(stored, t.clock.now).secret_rotation_ends_at).toBe(
      new Date(t.clock.now + 24 * HOUR).toISOString(),
    );
    expect(openSecrets(t.ctx, stored, t.clock.now + 24 * HOUR)).toEqual({ current: secret, previous: null });
    expect(JSON.stringify(await listAudit(t.ctx))).not.toContain(secret);
    await expect(rotateSecret(t.ctx, 'prt_b', endpoint.id, HOUR)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('of two rotations at once, the later keeps the earlier one signing: both secrets shown work', async () => {
    const { endpoint } = await create('https://a.example/hook');
    const outcomes = await raceOnRow(
      t,
      sql`SELECT id FROM webhook_endpoints WHERE id = ${endpoint.id} FOR UPDATE`,
      [1, 2].map(() => () => rotateSecret(t.ctx, 'prt_a', endpoint.id, HOUR)),
    );
    const shown = outcomes.map((o) => (o as PromiseFulfilledResult<{ secret: string }>).value.secret);
    const signing = openSecrets(t.ctx, (await getEndpoint(t.ctx, 'prt_a', endpoint.id))!);
    expect([signing.current, signing.previous].sort()).toEqual([...shown].sort());
  });

  it('is disabled by msgd and enabled by the operator, its failure clock starting again', async () => {
    const { endpoint } = await create('https://a.example/hook');
    await t.ctx.store.run(sql`UPDATE webhook_endpoints SET failing_since = 5 WHERE id = ${endpoint.id}`);
    await create('https://a.example/other');
    expect(await endpointHealthCounts(t.ctx)).toEqual({ failing: 1, disabled: 0 });
    await expect(enableEndpoint(t.ctx, endpoint.id, 'op')).rejects.toMatchObject({
      code: 'conflict',
      message: `webhook endpoint ${endpoint.id} is already enabled`,
    });
    expect(
      await t.ctx.store.transaction((tx) => disableEndpointIn(t.ctx, tx, endpoint.id, 'the endpoint answered 410')),
    ).toBe(true);
    expect(await t.ctx.store.transaction((tx) => disableEndpointIn(t.ctx, tx, endpoint.id, 'again'))).toBe(false);
    expect(await getEndpoint(t.ctx, 'prt_a', endpoint.id)).toMatchObject({
      status: 'disabled',
      disabled_reason: 'the endpoint answered 410',
    });
    expect(await endpointHealthCounts(t.ctx)).toEqual({ failing: 0, disabled: 1 });
    const enabled = await enableEndpoint(t.ctx, endpoint.id, 'op');
    expect(enabled).toMatchObject({ status: 'enabled', disabled_reason: null, failing_since: null });
    expect(await getEndpoint(t.ctx, 'prt_a', endpoint.id)).toEqual(enabled);
    expect((await listAudit(t.ctx)).slice(0, 2)).toMatchObject([
      { actor: 'op', action: 'webhook.enable' },
      { actor: 'system', action: 'webhook.disable', details: { reason: 'the endpoint answered 410' } },
    ]);
    await deleteEndpoint(t.ctx, 'prt_a', endpoint.id);
    await expect(enableEndpoint(t.ctx, endpoint.id, 'op')).rejects.toMatchObject({ code: 'not_found' });
    await expect(enableEndpoint(t.ctx, 'whe_nope', 'op')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('finds an endpoint by id or URL, a live one before a deleted one with the same URL', async () => {
    const gone = await create('https://a.example/hook');
    await deleteEndpoint(t.ctx, 'prt_a', gone.endpoint.id);
    expect(await findEndpointRef(t.ctx, 'https://a.example/hook')).toBe(gone.endpoint.id);
    const live = await create('https://a.example/hook');
    expect(await findEndpointRef(t.ctx, 'https://a.example/hook')).toBe(live.endpoint.id);
    expect(await findEndpointRef(t.ctx, gone.endpoint.id)).toBe(gone.endpoint.id);
    expect(await findEndpointRef(t.ctx, 'https://nowhere.example/')).toBeUndefined();
  });
});
