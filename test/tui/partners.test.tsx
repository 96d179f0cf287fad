import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { getPartner } from '../../src/core/partners.js';
import { listAudit } from '../../src/core/audit.js';
import { hashSecret } from '../../src/core/tokens.js';
import { addGateway } from '../../src/core/gateways.js';
import { sql } from '../../src/db/sql.js';
import { KEY, cleanupDirs, flat, newDataDir, openConsole, type Console } from './helpers.js';

// The Partners screen against a real data directory: every action goes through msgctl's core
// functions, so what the screen says is checked against the database too.

let c: Console | null = null;
afterEach(() => {
  c?.close();
  c = null;
});
afterAll(cleanupDirs);

async function createAcme(con: Console) {
  await con.press('2');
  await con.see('No partners yet');
  await con.press('n');
  await con.see('New partner');
  await con.press('acme', KEY.tab, 'Acme Ltd', KEY.enter);
  await con.see('Created partner acme');
  // The list reloads after the form closes: a key for the selected partner needs it selected.
  await con.see(/>acme\s+Acme Ltd/);
}

describe('msgctl tui: partners', () => {
  it('creates a partner, audited as tui:<user>', async () => {
    c = await openConsole(await newDataDir());
    await createAcme(c);
    const f = await c.see(/acme\s+Acme Ltd\s+active\s+0\.00 USD/);
    expect(f).toContain('n new');
    const p = await getPartner(c.cli.ctx, 'acme');
    expect(p.name).toBe('Acme Ltd');
    const entry = (await listAudit(c.cli.ctx, 10)).find((a) => a.action === 'partner.create');
    expect(entry?.actor).toMatch(/^tui:/);
  });

  it('shows the same error msgctl shows, in place, and creates nothing', async () => {
    c = await openConsole(await newDataDir());
    await c.press('2');
    await c.see('No partners yet');
    await c.press('n');
    await c.see('New partner');
    await c.press('Bad Slug!', KEY.tab, 'X', KEY.enter);
    const f = flat(await c.see('✗ invalid'));
    expect(f).toContain('slug: lowercase letters, digits and dashes');
    expect(f).toContain('New partner');
    await c.press(KEY.esc);
    await c.see('No partners yet');
  });

  it('tops up after a confirmation that names the amount and the new balance; cancel changes nothing', async () => {
    c = await openConsole(await newDataDir());
    await createAcme(c);
    await c.press('t');
    await c.see('Top up acme');
    await c.press('100.00', KEY.tab, 'invoice 42', KEY.enter);
    let f = flat(await c.see('Top up acme?'));
    expect(f).toContain('Adds 100.00 USD to acme (Acme Ltd)');
    expect(f).toContain('with the note "invoice 42"');
    expect(f).toContain('Balance 0.00 USD → 100.00 USD.');
    await c.press('n');
    await c.see('Cancelled: nothing was changed.');
    expect((await getPartner(c.cli.ctx, 'acme')).balance).toBe(0);

    await c.press('t');
    await c.see('Top up acme');
    await c.press('25.50', KEY.enter);
    await c.see('Top up acme?');
    await c.press('y');
    await c.see('Topped up acme by 25.50 USD; balance 25.50 USD.');
    expect((await getPartner(c.cli.ctx, 'acme')).balance).toBe(25_500_000);
    await c.see(/acme\s+Acme Ltd\s+active\s+25\.50 USD/);
  });

  it('issues a token: the secret is shown once in a box that says so, then gone; revoke asks first', async () => {
    c = await openConsole(await newDataDir());
    await createAcme(c);
    await c.press('i');
    await c.see('Issue a token for acme');
    // Scopes: messages:send is ticked; tick messages:read too (→, Space).
    await c.press('prod', KEY.tab, KEY.right, ' ', KEY.enter);
    const f = await c.see('Shown ONCE');
    expect(f).toContain('It is not stored and cannot be shown again.');
    const secret = f.match(/msgd_live_[A-Za-z0-9_-]{20,}/)?.[0];
    expect(secret).toBeTruthy();
    const row = (await c.cli.ctx.store.get<{ scopes: string; hash: string }>(
      sql`SELECT scopes, hash FROM tokens WHERE name = ${'prod'}`,
    ))!;
    expect(row.scopes).toBe('messages:read messages:send');
    expect(row.hash).toBe(hashSecret(secret!));
    await c.press(KEY.enter);
    await c.see('Issued token "prod"');
    expect(c.frame()).not.toContain(secret!);

    await c.press(KEY.enter);
    let d = await c.see('TOKENS');
    expect(d).toMatch(/prod\s+msgd_live_[\w-]{6}…\s+active\s+used never\s+messages:read,/);
    expect(d).not.toContain(secret!);

    await c.press('r');
    await c.see('Revoke a token of acme');
    await c.press(KEY.enter);
    d = flat(await c.see('Revoke token "prod" of acme?'));
    expect(d).toContain('This cannot be undone.');
    await c.press('y');
    await c.see('Revoked token "prod"');
    await c.see(/prod\s+msgd_live_[\w-]{6}…\s+revoked/);
  });

  it('assigns and unassigns a channel with a gateway picker', async () => {
    c = await openConsole(await newDataDir());
    await addGateway(c.cli.ctx, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
    await createAcme(c);
    await c.press('A');
    await c.see('Assign a channel to acme');
    // Channel: whatsapp → messenger → instagram → sms.
    await c.press(KEY.right, KEY.right, KEY.right);
    await c.see('‹ sms ›');
    await c.press(KEY.down, KEY.down, KEY.down, '+15550001111', KEY.enter);
    await c.see('Assigned sms to acme (sender +15550001111).');
    await c.press(KEY.enter);
    await c.see(/sms\s+primary\s+\+15550001111\s+via sandbox-1 \(sandbox\)/);
    await c.press('u');
    await c.see('Unassign a channel of acme');
    await c.press(KEY.enter);
    await c.see('Unassign sms from acme?');
    await c.press('y');
    await c.see('Unassigned sms (+15550001111) from acme.');
    await c.see('none: A assigns one');
  });

  it('adds a fallback gateway to an SMS channel and shows the order', async () => {
    c = await openConsole(await newDataDir());
    await addGateway(c.cli.ctx, { kind: 'sandbox', name: 'sandbox-1', settings: {} }, 'test');
    await addGateway(c.cli.ctx, { kind: 'sandbox', name: 'sandbox-2', settings: {} }, 'test');
    await createAcme(c);
    await c.press('A');
    await c.press(KEY.right, KEY.right, KEY.right);
    await c.see('‹ sms ›');
    await c.press(KEY.down, KEY.down, KEY.down, '+15550001111', KEY.enter);
    await c.see('Assigned sms to acme (sender +15550001111).');
    await c.press(KEY.enter);
    await c.press('A');
    await c.see('Assign a channel to acme (order now: sms: sandbox-1)');
    // Channel sms, gateway sandbox-2, place fallback, sender left empty: the primary's.
    await c.press(KEY.right, KEY.right, KEY.right, KEY.down, KEY.right, KEY.down, KEY.right, KEY.enter);
    await c.see("Added fallback 1 to acme's sms: sandbox-1 → sandbox-2.");
    await c.press(KEY.enter);
    await c.see(/sms\s+fallback 1\s+\+15550001111\s+via sandbox-2 \(sandbox\)/);
  });

  it('suspends after confirmation and activates again', async () => {
    c = await openConsole(await newDataDir());
    await createAcme(c);
    await c.press('s');
    const f = flat(await c.see('Suspend acme?'));
    expect(f).toContain("acme's tokens is refused (403) from the next request on.");
    await c.press(KEY.esc);
    await c.see('Cancelled');
    expect((await getPartner(c.cli.ctx, 'acme')).status).toBe('active');
    await c.press('s', 'y');
    await c.see('Suspended acme.');
    expect((await getPartner(c.cli.ctx, 'acme')).status).toBe('suspended');
    await c.press('s', 'y');
    await c.see('Activated acme.');
  });
});
