import type { CoreCtx } from '../core/context.js';
import { rollUpSpend } from '../core/spend.js';
import { pruneSessions } from '../core/ui-sessions.js';

// The console's upkeep, scheduled with the other maintenance tasks (src/jobs/maintenance.ts):
// the spend rollup keeps each Overview's catch-up small, and sessions nobody comes back to are
// removed (an expired one is also removed when it is presented). Typed by shape, so this file
// needs neither the runtime nor the maintenance module.
export const consoleTasks: { name: string; cron: string; run(rt: { ctx: CoreCtx }): unknown }[] = [
  { name: 'spend-rollup', cron: '* * * * *', run: (rt) => ({ entries: rollUpSpend(rt.ctx) }) },
  { name: 'ui-sessions-prune', cron: '41 * * * *', run: (rt) => ({ deleted: pruneSessions(rt.ctx) }) },
];
