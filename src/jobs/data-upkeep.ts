import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/schema.js';
import type { DataDir } from '../db/datadir.js';
import { pruneLoginAudit, redactOldContent } from '../core/retention.js';
import { backupDir, backupFileName, keepKeyBeside, pruneBackups, snapshot } from '../db/backup.js';
import type { MaintenanceTask } from '../queue/maintenance-task.js';
import type { MaintenanceDeps } from './maintenance.js';

// Scheduled backups and retention, run by the job loop like the other maintenance tasks.

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

/** Hourly, so each run has about an hour of messages to redact: small batches, never a backlog. */
function retentionTask(): MaintenanceTask<MaintenanceDeps> {
  return {
    name: 'retention',
    cron: '53 * * * *',
    run: async (rt) => {
      const { messageContentDays, loginAuditDays } = rt.config.retention;
      const content = messageContentDays === null ? null : await redactOldContent(rt.ctx, messageContentDays);
      const logins = await pruneLoginAudit(rt.ctx, loginAuditDays);
      return { content, loginAuditDeleted: logins };
    },
  };
}

export function dataUpkeepTasks(config: Config, dataDir: DataDir): MaintenanceTask<MaintenanceDeps>[] {
  return [...(config.backup.schedule ? [backupTask(config.backup.schedule, dataDir)] : []), retentionTask()];
}
