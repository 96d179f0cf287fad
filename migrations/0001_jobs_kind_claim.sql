DROP INDEX `jobs_lease`;--> statement-breakpoint
CREATE INDEX `jobs_kind_claim` ON `jobs` (`kind`,`state`,`priority`,`run_at`);