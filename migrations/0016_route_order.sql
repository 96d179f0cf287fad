CREATE TABLE `gateway_circuits` (
	`gateway_id` text PRIMARY KEY NOT NULL,
	`state` text NOT NULL,
	`failures` integer DEFAULT 0 NOT NULL,
	`retry_at` integer,
	`reason` text,
	`opened` integer DEFAULT 0 NOT NULL,
	`changed_at` integer NOT NULL
);
--> statement-breakpoint
DROP INDEX `channels_active_partner_type`;--> statement-breakpoint
DROP INDEX `channels_active_address`;--> statement-breakpoint
ALTER TABLE `channels` ADD `position` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `channels_active_partner_type` ON `channels` (`partner_id`,`type`,`position`) WHERE status = 'active';--> statement-breakpoint
CREATE UNIQUE INDEX `channels_active_address` ON `channels` (`type`,`sender`) WHERE status = 'active' AND position = 0;--> statement-breakpoint
DROP INDEX `prices_channel_partner`;--> statement-breakpoint
ALTER TABLE `prices` ADD `gateway_id` text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `prices_channel_partner` ON `prices` (`channel_type`,`partner_id`,`gateway_id`);