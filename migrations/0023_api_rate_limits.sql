CREATE TABLE `api_rate_limits` (
	`key` text PRIMARY KEY NOT NULL,
	`tat` real NOT NULL,
	`taken` integer DEFAULT 0 NOT NULL
);
