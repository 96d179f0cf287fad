-- Work counters per 10-second bucket (src/core/counters.ts) and msgd's heartbeat: what
-- msgctl tui's overview reads, from another process, without counting the messages table.
-- IF NOT EXISTS: new tables only, so running it again (a migration marked pending by hand) is harmless.
CREATE TABLE IF NOT EXISTS `counter_buckets` (
	`bucket` integer NOT NULL,
	`name` text NOT NULL,
	`labels` text NOT NULL,
	`value` integer NOT NULL,
	PRIMARY KEY(`bucket`, `name`, `labels`)
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS `heartbeat` (
	`id` integer PRIMARY KEY NOT NULL,
	`version` text NOT NULL,
	`pid` integer NOT NULL,
	`started_at` integer NOT NULL,
	`beat_at` integer NOT NULL,
	`running` integer NOT NULL,
	`gauges` text DEFAULT '{}' NOT NULL
);
