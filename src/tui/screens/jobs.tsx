import { Box, Text } from 'ink';
import { useKeys } from '../keys.js';
import { useState } from 'react';
import type { Job } from '../../queue/queue.js';
import { retryDeadJobs } from '../../jobs/dead-jobs.js';
import { deadJobs, pendingJobs } from '../data/jobs.js';
import { Flash, Table, moveSel } from '../components.js';
import { useDeps, useMode, usePoll, type FlashState } from '../hooks.js';
import { useOverlay } from '../overlay.js';
import { clean, when } from '../text.js';

// Jobs: dead jobs (retries used up) with their last error, and a retry through the same
// operation as msgctl jobs retry (src/jobs/dead-jobs.ts); d shows the jobs waiting or running instead.

export function JobsScreen({ width, height }: { width: number; height: number }) {
  const deps = useDeps();
  const { ctx } = deps;
  const [dead, setDead] = useState(true);
  const [sel, setSel] = useState(0);
  const [flash, setFlash] = useState<FlashState>(null);
  const jobs = usePoll(2000, () => (dead ? deadJobs(ctx) : pendingJobs(ctx)), [dead]);
  const rows: Job[] = jobs.data ?? [];
  const cur = rows[Math.min(sel, rows.length - 1)];
  const overlay = useOverlay(setFlash, () => jobs.reload());
  useMode(overlay.step ? 'form' : 'list');

  useKeys(
    (input, key) => {
      if (overlay.isOpen()) return;
      if (input === 'd') return (setDead((x) => !x), setSel(0));
      if (input === 'R') {
        if (!dead || !cur) return setFlash({ ok: false, text: 'Select a dead job first (d shows dead jobs).' });
        return overlay.open({
          kind: 'confirm',
          title: `Retry dead job ${cur.id}?`,
          lines: [
            `${cur.kind} ${JSON.stringify(cur.payload)}, dead after ${cur.attempts} attempts: ${cur.lastError ?? 'no error kept'}.`,
            'It is queued again with fresh attempts; a running msgd picks it up within a second.',
            'A send whose message already failed and was refunded is not retried (the partner sends anew).',
          ],
          run: async () => {
            const r = await retryDeadJobs(ctx, cur.id);
            return { text: `${r.retried} dead job(s) queued again; a running msgd picks it up within a second.` };
          },
        });
      }
      setSel((s) => moveSel(s, rows.length, input, key));
    },
    { isActive: !overlay.step },
  );

  const over = overlay.element(width);
  return (
    <Box flexDirection="column" width={width} height={height}>
      {over ?? (
        <>
          <Text bold>
            {dead
              ? 'Dead jobs, by when they were due (d: waiting and running)'
              : 'Jobs waiting or running, next first (d: dead)'}
          </Text>
          <Table
            width={width}
            height={height - 2}
            selected={sel}
            empty={dead ? 'No dead jobs.' : 'No jobs waiting or running.'}
            columns={[
              { title: 'id', width: 6, align: 'right' },
              { title: 'kind', width: 17 },
              { title: 'state', width: 9 },
              { title: 'tries', width: 5 },
              { title: dead ? 'died (utc)' : 'run at (utc)', width: 16 },
              { title: 'last error', width: 0 },
            ]}
            rows={rows.map((j) => [
              String(j.id),
              j.kind,
              j.state,
              `${j.attempts}/${j.maxAttempts}`,
              when(dead ? j.updatedAt : j.runAt).slice(0, 16),
              clean(j.lastError) || '-',
            ])}
          />
        </>
      )}
      <Flash
        flash={flash ?? (jobs.error ? { ok: false, text: jobs.error } : null)}
        position={!over ? { at: Math.min(sel, rows.length - 1), of: rows.length } : null}
      />
    </Box>
  );
}
