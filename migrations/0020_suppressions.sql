CREATE TABLE `suppressions` (
	`id` text PRIMARY KEY NOT NULL,
	`partner_id` text NOT NULL,
	`channel` text NOT NULL,
	`address` text NOT NULL,
	`scope` text DEFAULT '' NOT NULL,
	`reason` text NOT NULL,
	`group_id` text DEFAULT '' NOT NULL,
	`source` text NOT NULL,
	`detail` text,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `suppressions_address` ON `suppressions` (`partner_id`,`channel`,`address`,`scope`,`reason`,`group_id`);--> statement-breakpoint
CREATE INDEX `suppressions_partner` ON `suppressions` (`partner_id`,`id`);--> statement-breakpoint
ALTER TABLE `partners` ADD `opt_out_scope` text DEFAULT 'sender' NOT NULL;