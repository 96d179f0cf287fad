import type { Command } from 'commander';
import { INSTANCE_DEAD_AFTER_MS, readInstances, type InstanceInfo } from '../core/counter-store.js';
import { iso } from '../lib/time.js';
import { withCli, type Cli } from './context.js';
import { examples } from './help.js';
import { count, table, when, type Result } from './output.js';

// The msgd instances serving this store, from their heartbeat rows: one on SQLite, one per
// process sharing a PostgreSQL database. Dead ones (no beat for INSTANCE_DEAD_AFTER_MS) are
// listed as such until they are pruned, a day after their last beat.

/** "3s", "4m 10s", "2h 5m", "3d 1h". */
function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

const n = (i: InstanceInfo, key: string) => i.counters[key] ?? 0;

function stateText(i: InstanceInfo): string {
  if (i.state === 'running') return i.leader ? 'running, leader' : 'running';
  if (i.state === 'dead') return `dead (no beat for ${age(i.beatAgeMs)})`;
  return 'stopped';
}

async function list(cli: Cli): Promise<Result> {
  const all = await readInstances(cli.ctx);
  const rows = all.instances;
  const json = {
    data: rows.map((i) => ({
      id: i.id,
      host: i.host ?? null,
      pid: i.pid,
      version: i.version,
      state: i.state,
      leader: i.leader,
      started_at: iso(i.startedAt),
      last_beat_at: iso(i.beatAt),
      beat_age_ms: Math.max(0, Math.round(i.beatAgeMs)),
      dead_at: iso(i.deadAt ?? null),
      counters: i.counters,
    })),
    alive: all.alive,
    dead: all.dead,
  };
  if (!rows.length)
    return { json, text: 'No msgd has run on this store yet (or its last one stopped over a day ago).' };
  const text = [
    table(
      [
        'id',
        'host',
        'pid',
        'version',
        'state',
        'started (utc)',
        'last beat',
        'sent',
        'failed',
        'webhooks in',
        'deliveries',
      ],
      rows.map((i) => [
        i.id,
        i.host,
        i.pid,
        i.version,
        stateText(i),
        when(i.startedAt),
        `${age(i.beatAgeMs)} ago`,
        n(i, 'sent'),
        n(i, 'failed'),
        n(i, 'webhooks_in'),
        n(i, 'deliveries_ok') + n(i, 'deliveries_failed'),
      ]),
      { right: [2, 7, 8, 9, 10] },
    ),
    '',
    `${count(all.alive, 'instance')} running, ${all.dead} dead. Counters are since each instance started; an instance is dead after ${INSTANCE_DEAD_AFTER_MS / 1000} s without a beat.`,
  ].join('\n');
  return { json, text };
}

export function registerInstances(program: Command) {
  program
    .command('instances')
    .description('list the msgd instances serving this store: running (the leader marked), stopped, dead')
    .addHelpText('after', examples('msgctl instances', 'msgctl instances --json'))
    .action(withCli(list));
}
