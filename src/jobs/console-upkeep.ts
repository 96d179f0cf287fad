import type { CoreCtx } from '../core/context.js';
import { rollUpSpend } from '../core/spend.js';
import { pruneSessions } from '../core/ui-sessions.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';

// The web console's upkeep, scheduled with the other maintenance tasks (./maintenance.ts): the
// spend rollup keeps each Overview's catch-up small, and sessions nobody comes back to are
// removed (an expired one is also removed when it is presented).
export const consoleTasks: MaintenanceTask<{ ctx: CoreCtx }>[] = [
  { name: 'spend-rollup', cron: '* * * * *', run: async (rt) => ({ entries: await rollUpSpend(rt.ctx) }) },
  { name: 'ui-sessions-prune', cron: '41 * * * *', run: async (rt) => ({ deleted: await pruneSessions(rt.ctx) }) },
];
