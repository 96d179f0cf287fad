// A periodic task: src/jobs/maintenance.ts has the cron enqueue one job per task and slot and
// runs it on the worker. The engine knows nothing of what a task needs: each module that
// declares tasks names its own `Deps` (a core handle, the config), and the server hands the
// tasks one object that has them all.
export interface MaintenanceTask<Deps> {
  name: string;
  /** node-cron expression (with seconds optional). */
  cron: string;
  /** Synchronous or async work; returns a small summary for the log. */
  run(deps: Deps): unknown;
}
