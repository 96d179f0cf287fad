CREATE TABLE `gateway_lines` (
	`gateway_id` text PRIMARY KEY NOT NULL,
	`line` integer DEFAULT 0 NOT NULL,
	`interval_us` integer NOT NULL,
	`active` integer NOT NULL,
	`tat` integer DEFAULT 0 NOT NULL,
	`next_go` integer DEFAULT 0 NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `gateway_places` (
	`job_id` integer PRIMARY KEY NOT NULL,
	`gateway_id` text NOT NULL,
	`line` integer NOT NULL,
	`at` integer NOT NULL,
	`respaced` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE INDEX `gateway_places_gateway` ON `gateway_places` (`gateway_id`);