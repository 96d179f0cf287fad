import { afterAll, describe, expect, it } from 'vitest';
import { addGateway, getGateway, updateGateway } from '../../src/core/gateways.js';
import { openTestCtx } from '../helpers/ctx.js';

const t = openTestCtx();
afterAll(() => t.close());

describe('gateway settings checked when they change', () => {
  it('a Messenger gateway stored before MESSAGE_TAG needed a tag can still be disabled and rotated; the next --set says what to fix', () => {
    const g = addGateway(
      t.ctx,
      { kind: 'meta_messenger', name: 'fb-old', settings: { page_id: '123' }, secrets: { page_access_token: 'x' } },
      'test',
    );
    // As an older msgd stored it: tagged sending without a tag (Meta refuses every such send).
    t.ctx.db.sqlite
      .prepare('UPDATE gateways SET settings = ? WHERE id = ?')
      .run(JSON.stringify({ ...g.settings, messaging_type: 'MESSAGE_TAG' }), g.id);
    expect(updateGateway(t.ctx, g.id, { status: 'disabled' }, 'test').status).toBe('disabled');
    expect(updateGateway(t.ctx, g.id, { secrets: { page_access_token: 'rotated' } }, 'test').secret_names).toEqual([
      'page_access_token',
    ]);
    expect(() => updateGateway(t.ctx, g.id, { settings: { rate_per_second: 10 } }, 'test')).toThrow(
      /invalid settings for a meta_messenger gateway/,
    );
    const fixed = updateGateway(t.ctx, g.id, { settings: { tag: 'HUMAN_AGENT' } }, 'test');
    expect(fixed.settings).toMatchObject({ messaging_type: 'MESSAGE_TAG', tag: 'HUMAN_AGENT' });
    expect(getGateway(t.ctx, g.id).status).toBe('disabled');
  });
});
