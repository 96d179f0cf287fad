PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_heartbeat` (
	`id` text PRIMARY KEY NOT NULL,
	`version` text NOT NULL,
	`pid` integer NOT NULL,
	`started_at` integer NOT NULL,
	`beat_at` integer NOT NULL,
	`running` integer NOT NULL,
	`gauges` text DEFAULT '{}' NOT NULL,
	`host` text,
	`leader` integer DEFAULT 0 NOT NULL,
	`counters` text DEFAULT '{}' NOT NULL,
	`dead_at` integer
);
--> statement-breakpoint
INSERT INTO `__new_heartbeat`("id", "version", "pid", "started_at", "beat_at", "running", "gauges", "host") SELECT "id", "version", "pid", "started_at", "beat_at", "running", "gauges", "host" FROM `heartbeat`;--> statement-breakpoint
DROP TABLE `heartbeat`;--> statement-breakpoint
ALTER TABLE `__new_heartbeat` RENAME TO `heartbeat`;--> statement-breakpoint
PRAGMA foreign_keys=ON;