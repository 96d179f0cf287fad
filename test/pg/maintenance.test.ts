import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from '../../src/db/sql.js';
import pino from 'pino';
import { loadConfig } from '../../src/config/load.js';
import { type Maintenance, maintenanceKind, startMaintenance } from '../../src/jobs/maintenance.js';
import { createRuntime, type Runtime } from '../../src/runtime.js';
import { startGraphFake, type GraphFake, type MetaTemplate } from '../fakes/graph.js';
import { runCli } from '../helpers/cli.js';
import { connect, setupPartner, startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';
import { migratedDatabase } from './helpers.js';

// msgd on PostgreSQL runs cron and the maintenance jobs: the WhatsApp template catalogues are
// read when it starts (a cron slot fired at start, run by the worker), and a task enqueued by
// its name runs on the worker as on SQLite. The start-up warning no longer names maintenance.
// msgctl's on-demand sync reads the catalogue on PostgreSQL too. Two msgd on the database, each
// with its cron on a task of every second, run each second's slot once between them.

const WABA = '102290129340398';
const TOKEN = 'EAA-wa-token';
const DAY = 86_400_000;

const CATALOGUE: MetaTemplate[] = [
  {
    id: '2001',
    name: 'order_update',
    language: 'en_US',
    status: 'APPROVED',
    category: 'UTILITY',
    components: [{ type: 'BODY', text: 'Order {{1}} has shipped.' }],
  },
  {
    id: '2002',
    name: 'spring_sale',
    language: 'en_US',
    status: 'APPROVED',
    category: 'MARKETING',
    components: [{ type: 'BODY', text: 'Our spring sale starts today.' }],
  },
];

const db = migratedDatabase();
let graph: GraphFake;
let s: TestServer | undefined;
let env: Record<string, string>;
let gatewayId: string;

const lines = (server: TestServer) => server.logs.map((l) => JSON.parse(l) as Record<string, any>);

beforeAll(async () => {
  graph = await startGraphFake();
  env = { MSGD_DATABASE_URL: db.url, MSGD_MASTER_KEY: randomBytes(32).toString('hex') };
});
afterAll(async () => {
  await s?.stop();
  await graph?.close();
});

describe('maintenance on PostgreSQL', () => {
  it('reads the WhatsApp template catalogues when msgd starts', async () => {
    s = await startTestServer({}, { env });
    const warning = lines(s).find((l) => Array.isArray(l.sqliteOnlyParts));
    expect(warning?.sqliteOnlyParts ?? []).not.toContain('maintenance');
    expect(lines(s).map((l) => l.msg)).toContain(
      "SQLite's own upkeep (WAL checkpoints, optimize, scheduled backups) does not run on PostgreSQL: its autovacuum keeps the database",
    );
    const p = await setupPartner(s.ctx);
    gatewayId = (
      await connect(
        s.ctx,
        p.partnerId,
        {
          kind: 'whatsapp_cloud',
          settings: { base_url: graph.url, phone_number_id: '106540352242922', waba_id: WABA },
          secrets: { access_token: TOKEN, app_secret: 'app-secret' },
        },
        'whatsapp',
        '+15550783881',
      )
    ).gateway.id;
    graph.setCatalogue(WABA, TOKEN, CATALOGUE);
    await s.stop();
    // A start's slot is its second: the next start is in another one.
    const clock = s.clock;
    clock.advance(2000);
    s = await startTestServer({}, { env, clock });
    const server = s;
    await waitFor(
      async () =>
        (
          await server.ctx.store.get<{ templates: number }>(
            sql`SELECT templates FROM whatsapp_template_syncs WHERE gateway_id = ${gatewayId}`,
          )
        )?.templates === CATALOGUE.length,
      'the catalogue read on start',
      10_000,
    );
    const names = await server.ctx.store.all<{ name: string }>(
      sql`SELECT name FROM whatsapp_templates WHERE gateway_id = ${gatewayId} ORDER BY name`,
    );
    expect(names.map((r) => r.name)).toEqual(['order_update', 'spring_sale']);
    // Read from Graph (at least once: a sync whose job is retried, on a loaded machine, reads again).
    expect(
      graph.requests.filter((r) => r.method === 'GET' && r.path.includes('message_templates')).length,
    ).toBeGreaterThanOrEqual(1);
    await waitFor(
      () => lines(server).some((l) => l.msg === 'maintenance task done' && l.task === 'whatsapp-templates-sync'),
      'the task logged done',
      5_000,
    );
  });

  it('runs a maintenance task enqueued by its name', async () => {
    const server = s!;
    const now = server.clock.now();
    await server.ctx.store.run(
      sql`INSERT INTO provider_event_keys (key, created_at) VALUES ('meta:old', ${now - 9 * DAY}), ('meta:new', ${now})`,
    );
    await server.ctx.store.transaction((tx) =>
      server.rt.queue.enqueue(tx, { kind: maintenanceKind('provider-event-keys-expire') }),
    );
    await waitFor(
      () => lines(server).some((l) => l.msg === 'maintenance task done' && l.task === 'provider-event-keys-expire'),
      'the task to run',
      10_000,
    );
    const keys = await server.ctx.store.all<{ key: string }>(sql`SELECT key FROM provider_event_keys ORDER BY key`);
    expect(keys.map((r) => r.key)).toEqual(['meta:new']);
    expect(lines(server).find((l) => l.task === 'provider-event-keys-expire')?.summary).toEqual({ deleted: 1 });
  });

  it('msgctl gateway templates sync reads a catalogue on demand', async () => {
    graph.setCatalogue(WABA, TOKEN, [
      ...CATALOGUE,
      { ...CATALOGUE[0], id: '2003', name: 'winter_sale', category: 'MARKETING' },
    ]);
    graph.reset();
    const r = await runCli(['--json', 'gateway', 'templates', 'sync', gatewayId], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ templates: 3 });
    const names = await s!.ctx.store.all<{ name: string }>(
      sql`SELECT name FROM whatsapp_templates WHERE gateway_id = ${gatewayId} ORDER BY name`,
    );
    expect(names.map((x) => x.name)).toEqual(['order_update', 'spring_sale', 'winter_sale']);
  });
});

describe('two msgd on one PostgreSQL', () => {
  it('run each cron slot once between them', async () => {
    const runtimes: Runtime[] = [];
    const started: Maintenance[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const rt = await createRuntime({ config: loadConfig({ env }), logger: pino({ level: 'silent' }), env });
        runtimes.push(rt);
      }
      const [a] = runtimes;
      await a.ctx.store.run(sql.raw('CREATE TABLE ticks (at BIGINT NOT NULL)'));
      for (const rt of runtimes) {
        rt.maintenanceTasks.push({
          name: 'tick',
          cron: '* * * * * *',
          run: async (d: { ctx: Runtime['ctx'] }) => {
            await d.ctx.store.run(sql`INSERT INTO ticks (at) VALUES (${Date.now()})`);
            return {};
          },
        });
        started.push(startMaintenance(rt));
        rt.worker.start();
      }
      const count = async (q: ReturnType<typeof sql>) => Number((await a.ctx.store.get<{ n: number }>(q))!.n);
      await waitFor(async () => (await count(sql`SELECT count(*) AS n FROM ticks`)) >= 3, 'three ticks', 10_000);
      for (const m of started) m.stop();
      await waitFor(
        async () => (await count(sql`SELECT count(*) AS n FROM jobs WHERE kind = ${maintenanceKind('tick')}`)) === 0,
        'the last tick run',
        10_000,
      );
      // One run per claimed slot, and no slot claimed twice (cron_runs' key is the slot).
      const slots = await count(sql`SELECT count(*) AS n FROM cron_runs WHERE key LIKE 'tick:%'`);
      expect(await count(sql`SELECT count(*) AS n FROM ticks`)).toBe(slots);
      expect(slots).toBeGreaterThanOrEqual(3);
      // A slot already run, fired again by either msgd (a late timer, a restart in that second):
      // its job is gone, and the claim in cron_runs still refuses it.
      const keys = await a.ctx.store.all<{ key: string }>(
        sql`SELECT key FROM cron_runs WHERE key LIKE 'tick:%' ORDER BY key`,
      );
      const slot = new Date(keys[0].key.slice('tick:'.length));
      for (const m of started) expect((await m.cron.fire('tick', slot)).created).toBe(false);
      expect(await count(sql`SELECT count(*) AS n FROM jobs WHERE kind = ${maintenanceKind('tick')}`)).toBe(0);
    } finally {
      for (const m of started) m.stop();
      for (const rt of runtimes) await rt.close();
    }
  });
});
