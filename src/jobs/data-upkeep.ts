import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/schema.js';
import type { DataDir } from '../db/datadir.js';
import { backupDir, backupFileName, keepKeyBeside, pruneBackups, snapshot } from '../db/backup.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';
import type { MaintenanceDeps } from './maintenance.js';

// Scheduled backups of the SQLite data directory, run by the job loop like the other maintenance
// tasks (retention, on both stores, is one of src/jobs/maintenance.ts's built-in tasks).

/** backup.schedule: a snapshot into backup.dir, keeping the newest backup.keep. */
function backupTask(schedule: string, dataDir: DataDir): MaintenanceTask<MaintenanceDeps> {
  return {
    name: 'backup',
    cron: schedule,
    run: async (rt) => {
      const dir = backupDir(rt.config);
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      // From its own thread and connection: the event loop keeps serving while it copies.
      const result = await snapshot(dataDir.db.path, join(dir, backupFileName(rt.ctx.now())));
      const keyFile = keepKeyBeside(rt.config, result.file, { key: dataDir.masterKey, source: dataDir.keySource });
      const removed = pruneBackups(dir, rt.config.backup.keep, readdirSync(dir));
      return { file: result.file, keyFile, bytes: result.bytes, durationMs: result.durationMs, removed };
    },
  };
}

/** The data directory's own tasks; PostgreSQL has none (its backups are pg_dump's or archiving's). */
export function dataUpkeepTasks(config: Config, dataDir: DataDir): MaintenanceTask<MaintenanceDeps>[] {
  return config.backup.schedule ? [backupTask(config.backup.schedule, dataDir)] : [];
}
