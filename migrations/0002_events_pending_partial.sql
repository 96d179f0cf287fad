DROP INDEX `events_pending`;--> statement-breakpoint
CREATE INDEX `events_pending` ON `events` (`fanned_out`) WHERE fanned_out = 0;