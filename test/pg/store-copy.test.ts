import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createInbound, createOutbound } from '../../src/core/messages.js';
import { insertWebhookLog } from '../../src/core/webhook-log.js';
import { openDataDir } from '../../src/db/datadir.js';
import { lockDataDir } from '../../src/db/instance-lock.js';
import { pinConnection } from '../../src/db/pin.js';
import { openPg } from '../../src/db/pg/store.js';
import { sql } from '../../src/db/sql.js';
import { cleanEnv, MSGCTL, runCli, spawnCli } from '../helpers/cli.js';
import { coreCtx } from '../helpers/ctx.js';
import { createDatabase, migratedTemplate, pgAdminUrl, withClient } from './helpers.js';

// msgctl store copy, as an operator runs it: a data directory made through msgctl and core
// (partners with money, a gateway with a sealed secret, messages and contacts with unicode and
// control characters, a raw webhook body), copied into PostgreSQL and read back there.

const BIG = 10 ** 15; // micro-units: the largest balance msgd allows
const NAME = 'Zoë 👋 \u0007bell \u001b[31mred\u001b[0m\ttab "q" \\ ✓';
const BODY = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x80, 0x22, 0x5c]);

let root: string;
let source: string;

/** A copy of the source data directory, to change without touching the others. */
function dataDirCopy(label: string): string {
  const dir = join(root, label);
  cpSync(source, dir, { recursive: true });
  return dir;
}

/** Raw SQL on a data directory's SQLite file, as a broken or hand-edited database would hold it. */
function editSqlite(dir: string, fn: (db: Database.Database) => void) {
  const db = pinConnection(new Database(join(dir, 'msgd.db')));
  try {
    fn(db);
  } finally {
    db.close();
  }
}

async function rowsIn(url: string): Promise<Record<string, number>> {
  return withClient(url, async (c) => {
    const { rows } = await c.query<{ relname: string }>(
      `SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace AND relname <> '__drizzle_migrations'`,
    );
    const out: Record<string, number> = {};
    for (const { relname } of rows) {
      const r = await c.query<{ n: string }>(`SELECT count(*)::text AS n FROM "${relname}"`);
      out[relname] = Number(r.rows[0].n);
    }
    return out;
  });
}

/** Every table holds no row msgd wrote (meta's settings_version is the migrations'). */
async function expectEmpty(url: string) {
  const rows = await rowsIn(url);
  for (const [t, n] of Object.entries(rows)) expect({ t, n }).toEqual({ t, n: t === 'meta' ? n : 0 });
  if ('meta' in rows) expect(rows.meta).toBeLessThanOrEqual(1);
}

const databases: { drop(): Promise<void> }[] = [];
async function target(label: string, migrated = false) {
  const db = await createDatabase(`copy_${label}`, migrated ? { template: migratedTemplate() } : {});
  databases.push(db);
  return db;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'msgd-store-copy-'));
  source = join(root, 'source');
  const ok = async (args: string[], stdin?: string) => {
    const r = await runCli(args, { dataDir: source, stdin });
    expect(r.code, r.stderr).toBe(0);
  };
  await ok(['init']);
  await ok(['partner', 'create', 'acme', '--name', 'Acme Ltd']);
  await ok(['partner', 'create', 'big', '--name', 'Big ✓ Ltd']);
  await ok(
    ['gateway', 'add', 'twilio', '--name', 'tw', '--set', 'account_sid=AC123', '--secret-stdin', 'auth_token'],
    'tok-secret-1',
  );
  await ok(['channel', 'assign', 'acme', 'tw', 'sms', '--from', '+15550001111']);
  await ok(['balance', 'topup', 'acme', '100.00', '--note', 'invoice 42 ✓']);
  await ok(['balance', 'topup', 'big', '1000000000', '--note', 'the most a balance holds']);
  await ok(['token', 'issue', 'acme', '--name', 'prod', '--scopes', 'messages:send']);

  const dd = openDataDir(source, { env: {} });
  try {
    const ctx = coreCtx(dd, { dataDir: source });
    const ch = dd.db.sqlite.prepare(`SELECT id, gateway_id, sender FROM channels`).get() as {
      id: string;
      gateway_id: string;
      sender: string;
    };
    const acme = dd.db.sqlite.prepare(`SELECT id FROM partners WHERE slug = 'acme'`).get() as { id: string };
    const channel = { id: ch.id, type: 'sms' as const, gatewayId: ch.gateway_id, sender: ch.sender };
    dd.db.sqlite.transaction(() => {
      for (let i = 0; i < 3; i++) {
        createOutbound(ctx, {
          partnerId: acme.id,
          channel,
          to: `+1555000200${i}`,
          content: { kind: 'text', text: `Grüße ${i} 👋 — “quotes”` },
          price: 7500,
          segments: 1,
          actor: 'test',
          lowBalanceThreshold: null,
        });
      }
      createInbound(ctx, {
        partnerId: acme.id,
        channel,
        from: '+15550009999',
        profileName: NAME,
        providerMessageId: 'SM1',
        content: { kind: 'text', text: NAME },
        occurredAt: Date.now(),
      });
    })();
    insertWebhookLog(ctx, {
      id: 'wh_1',
      provider: 'twilio',
      gateway_id: ch.gateway_id,
      method: 'POST',
      path: '/webhooks/twilio/x',
      headers: '{}',
      body: BODY,
      verification: 'ok',
      verification_reason: null,
      processing: 'processed',
      error: null,
      received_at: Date.now(),
      processed_at: Date.now(),
    } as never);
  } finally {
    dd.close();
  }
});

afterAll(async () => {
  for (const db of databases) await db.drop();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('msgctl store copy', () => {
  it('copies every table into an empty database, checks counts and money, and names the key', async () => {
    const db = await target('main');
    const password = new URL(db.url).password;
    expect(password.length).toBeGreaterThan(4);
    const r = await spawnCli(['store', 'copy', '--to', db.url], { dataDir: source });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Copied ');
    expect(r.stdout).toMatch(/TABLE\s+SQLITE\s+POSTGRESQL/);
    expect(r.stdout).toMatch(/ledger_entries\s+5\s+5\s+ok/);
    expect(r.stdout).toMatch(/messages\s+4\s+4\s+ok/);
    expect(r.stdout).toContain('Ledger total: 1000000099.9775 on both');
    expect(r.stdout).toContain(`the data directory's key file ${join(source, 'master.key')}`);
    expect(r.stdout).toContain('docs/scale.md');
    expect(r.stdout).not.toContain(password);
    expect(r.stdout).toContain(':***@');

    // Every table holds what SQLite holds.
    const pgRows = await rowsIn(db.url);
    editSqlite(source, (s) => {
      for (const [t, n] of Object.entries(pgRows)) {
        const row = s.prepare(`SELECT count(*) AS n FROM "${t}"`).get() as { n: number };
        expect({ t, n }).toEqual({ t, n: row.n });
      }
    });
    expect(pgRows.partners).toBe(2);

    // Values read back exactly, through msgd's own PostgreSQL layer.
    const store = openPg(db.url, { logger: { warn: () => {} } });
    try {
      const big = await store.get<{ balance: number; s: bigint }>(
        sql`SELECT p.balance, (SELECT sum(amount) FROM ledger_entries l WHERE l.partner_id = p.id) AS s FROM partners p WHERE slug = 'big'`,
      );
      expect(big).toEqual({ balance: BIG, s: BigInt(BIG) });
      const contact = await store.get<{ name: string }>(sql`SELECT name FROM contacts WHERE name IS NOT NULL`);
      expect(contact?.name).toBe(NAME);
      const wh = await store.get<{ body: Buffer }>(sql`SELECT body FROM provider_webhooks WHERE id = 'wh_1'`);
      expect(Buffer.compare(wh!.body, BODY)).toBe(0);
      // The sealed secret is the same text: the same key opens it.
      let sealed = '';
      editSqlite(source, (s) => {
        sealed = (s.prepare(`SELECT secrets FROM gateways`).get() as { secrets: string }).secrets;
      });
      expect(await store.get(sql`SELECT secrets FROM gateways`)).toEqual({ secrets: sealed });
      // The identity sequence is past the copied ids: a new entry gets the next one.
      const next = await store.get<{ id: number; max: number }>(
        sql`WITH n AS (INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, actor, created_at)
            SELECT id, 'adjustment', 0, balance, 'test', 0 FROM partners WHERE slug = 'acme' RETURNING id)
            SELECT n.id, (SELECT max(id) FROM ledger_entries) AS max FROM n`,
      );
      expect(next!.id).toBe(6);
    } finally {
      await store.close();
    }
  });

  it('refuses a database that has rows, naming a table, and changes nothing there', async () => {
    const db = await target('rerun');
    expect((await runCli(['store', 'copy', '--to', db.url], { dataDir: source })).code).toBe(0);
    const before = await rowsIn(db.url);
    const r = await runCli(['store', 'copy', '--to', db.url], { dataDir: source });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^msgctl: the target database is not empty \(table partners has rows\)/);
    expect(r.stderr + r.stdout).not.toContain(new URL(db.url).password);
    expect(await rowsIn(db.url)).toEqual(before);
  });

  it('copies into a database that has the schema and no rows, with --json', async () => {
    const db = await target('json', true);
    const r = await runCli(['--json', 'store', 'copy', '--to', db.url], { dataDir: source });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.ok).toBe(true);
    expect(out.migrated).toEqual([]);
    expect(out.target).not.toContain(new URL(db.url).password);
    expect(out.master_key).toEqual({ source: 'data_dir', path: join(source, 'master.key') });
    expect(out.money.ledger_total_source).toBe('1000000099977500');
    expect(out.money.ledger_total_target).toBe('1000000099977500');
    expect(out.money.mismatches).toEqual([]);
    for (const t of out.tables) expect(t.target_rows).toBe(t.source_rows);
    expect(out.tables.find((t: { table: string }) => t.table === 'partners').source_rows).toBe(2);
  });

  it('copies as a role that owns the database, its password given in PGPASSWORD', async () => {
    const role = `msgd_copy_${process.pid}`;
    const password = `pw-${process.pid}-secret`;
    const admin = new URL(pgAdminUrl());
    await withClient(admin.toString(), async (c) => {
      await c.query(`DROP ROLE IF EXISTS ${role}`);
      await c.query(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
      await c.query(`CREATE DATABASE ${role} OWNER ${role}`);
    });
    try {
      const url = new URL(admin.toString());
      url.username = role;
      url.password = '';
      url.pathname = `/${role}`;
      const r = await spawnCli(['store', 'copy', '--to', url.toString()], {
        dataDir: source,
        env: { PGPASSWORD: password },
      });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/partners\s+2\s+2\s+ok/);
      expect(r.stdout + r.stderr).not.toContain(password);
    } finally {
      await withClient(admin.toString(), async (c) => {
        await c.query(`DROP DATABASE IF EXISTS ${role} WITH (FORCE)`);
        await c.query(`DROP ROLE IF EXISTS ${role}`);
      });
    }
  });

  it('names MSGD_MASTER_KEY as the key the target needs, without printing it', async () => {
    const dir = dataDirCopy('env-key');
    const key = readFileSync(join(dir, 'master.key'), 'utf8').trim();
    rmSync(join(dir, 'master.key'));
    const db = await target('envkey');
    const r = await runCli(['store', 'copy', '--to', db.url], { dataDir: dir, env: { MSGD_MASTER_KEY: key } });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('the MSGD_MASTER_KEY environment variable');
    expect(r.stdout + r.stderr).not.toContain(key);
  });

  it('refuses while msgd runs on the data directory', async () => {
    const db = await target('locked');
    const lock = lockDataDir(source);
    try {
      const r = await spawnCli(['store', 'copy', '--to', db.url], { dataDir: source });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`msgctl: msgd is running on ${source}: stop it first`);
    } finally {
      lock.release();
    }
    expect(await rowsIn(db.url)).toEqual({});
  });

  it('refuses a SQLite database with pending migrations, pointing at msgctl migrate', async () => {
    const dir = dataDirCopy('pending');
    editSqlite(dir, (s) =>
      s.exec('DELETE FROM __drizzle_migrations WHERE created_at = (SELECT max(created_at) FROM __drizzle_migrations)'),
    );
    const db = await target('pending');
    const r = await runCli(['store', 'copy', '--to', db.url], { dataDir: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/pending migration\(s\) \(.+\): run "msgctl migrate" first/);
    expect(await rowsIn(db.url)).toEqual({});
  });

  it('refuses text holding NUL, naming table, column and row, and leaves the target empty', async () => {
    const dir = dataDirCopy('nul');
    let id = '';
    editSqlite(dir, (s) => {
      id = (s.prepare(`SELECT id FROM contacts LIMIT 1`).get() as { id: string }).id;
      s.prepare(`UPDATE contacts SET name = 'a' || char(0) || 'b' WHERE id = ?`).run(id);
    });
    const db = await target('nul');
    const r = await runCli(['store', 'copy', '--to', db.url], { dataDir: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`cannot copy contacts.name of the row with id ${id}: the text holds a NUL character`);
    // partners, gateways and more were inserted before contacts: the rollback took them away.
    await expectEmpty(db.url);
  });

  it('rolls back a copy that PostgreSQL refuses half-way (a broken foreign key), leaving the target empty', async () => {
    const dir = dataDirCopy('fk');
    editSqlite(dir, (s) => {
      s.pragma('foreign_keys = OFF');
      s.exec(
        `INSERT INTO ledger_entries (partner_id, kind, amount, balance_after, actor, created_at) VALUES ('prt_gone', 'topup', 1, 1, 'x', 0)`,
      );
    });
    const db = await target('fk');
    const r = await runCli(['store', 'copy', '--to', db.url], { dataDir: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/copying ledger_entries \(rows 1-6 of 6\) failed, and nothing was copied: .*foreign key/);
    await expectEmpty(db.url);
  });

  it('leaves the target empty when the copying process is killed mid-copy', async () => {
    const dir = dataDirCopy('kill');
    editSqlite(dir, (s) =>
      s.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150000)
        INSERT INTO audit_log (actor, action, target_type, details, created_at)
        SELECT 'cli:test', 'test.row', 'partner', '{"i":' || i || ',"text":"Grüße 👋"}', i FROM n`),
    );
    const db = await target('kill');
    const child = spawn(process.execPath, [MSGCTL, '--data-dir', dir, 'store', 'copy', '--to', db.url], {
      env: cleanEnv(),
      stdio: 'ignore',
    });
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.on('exit', (_code, signal) => resolve(signal)),
    );
    const copying = `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'msgctl store copy'`;
    // Killed while its transaction inserts audit_log's 150,000 rows (batches of 2,000).
    await withClient(db.url, async (c) => {
      for (let i = 0; i < 1500; i++) {
        const { rows } = await c.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'INSERT INTO "audit_log"%'`,
          [db.name],
        );
        if (rows[0].n > 0) return;
        await new Promise((r) => setTimeout(r, 20));
      }
      throw new Error('the copy never reached audit_log');
    });
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    await withClient(db.url, async (c) => {
      for (let i = 0; i < 500 && (await c.query<{ n: number }>(copying, [db.name])).rows[0].n > 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
    });
    await expectEmpty(db.url);
    // And the copy simply runs again.
    const again = await runCli(['--json', 'store', 'copy', '--to', db.url], { dataDir: dir });
    expect(again.code, again.stderr).toBe(0);
    expect(
      JSON.parse(again.stdout).tables.find((t: { table: string }) => t.table === 'audit_log').target_rows,
    ).toBeGreaterThan(150000);
  }, 120_000);

  it('shows progress on a terminal, and only there', async () => {
    const db = await target('tty');
    const { spawn: spawnPty } = await import('@lydell/node-pty');
    const term = spawnPty(process.execPath, [MSGCTL, '--data-dir', source, 'store', 'copy', '--to', db.url], {
      cols: 160,
      rows: 10,
      cwd: root,
      env: cleanEnv() as Record<string, string>,
    });
    let screen = '';
    term.onData((d) => (screen += d));
    const code = await new Promise<number>((r) => term.onExit((e) => r(e.exitCode)));
    expect(code, screen).toBe(0);
    expect(screen).toMatch(/copying ledger_entries: 5 \/ 5 rows \([\d,]+ rows\/s overall\)/);
    expect(screen).toContain('Copied ');
    expect(screen).not.toContain(new URL(db.url).password);
    const piped = await runCli(['store', 'copy', '--to', (await target('piped')).url], { dataDir: source });
    expect(piped.code).toBe(0);
    expect(piped.stderr + piped.stdout).not.toContain('copying ');
  });

  it('rolls back and fails when the sums do not agree (a trigger on the target changes an amount)', async () => {
    const db = await target('mismatch', true);
    await withClient(db.url, (c) =>
      c.query(`CREATE FUNCTION skew() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.amount := NEW.amount + 1; RETURN NEW; END $$;
        CREATE TRIGGER skew BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION skew();`),
    );
    const r = await runCli(['store', 'copy', '--to', db.url], { dataDir: source });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^msgctl: the copy does not match the source, and was rolled back: the target is empty again/m,
    );
    expect(r.stdout).toMatch(/ledger_entries\s+5\s+5\s+ok/);
    expect(r.stdout).toContain('Ledger total: 1000000099.9775 ≠ 1000000099.977505');
    expect(r.stdout).toMatch(/Partners that differ: prt_\w+ ledger 99977500 ≠ 99977504/);
    await expectEmpty(db.url);
  });

  it('refuses a target whose encoding is not UTF8, and a --to that is not a PostgreSQL URL', async () => {
    const name = `copy_ascii_${process.pid}`;
    await withClient(pgAdminUrl(), (c) => c.query(`CREATE DATABASE ${name} ENCODING 'SQL_ASCII' TEMPLATE template0`));
    try {
      const url = new URL(pgAdminUrl());
      url.pathname = `/${name}`;
      const r = await runCli(['store', 'copy', '--to', url.toString()], { dataDir: source });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("the target database's encoding is SQL_ASCII, not UTF8");
      expect(await rowsIn(url.toString())).toEqual({});
    } finally {
      await withClient(pgAdminUrl(), (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    }
    const bad = await runCli(['store', 'copy', '--to', 'mysql://u:pw123456@h/db'], { dataDir: source });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('msgctl: --to must be a postgres:// or postgresql:// URL, not mysql://u:***@h/db\n');
  });

  it('never shows the password of a URL it cannot reach', async () => {
    const r = await runCli(['store', 'copy', '--to', 'postgres://msgd:hunter2secret@127.0.0.1:1/msgd'], {
      dataDir: source,
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('postgres://msgd:***@127.0.0.1:1/msgd');
    expect(r.stderr + r.stdout).not.toContain('hunter2secret');
  });
});
