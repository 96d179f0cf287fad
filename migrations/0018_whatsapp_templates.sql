CREATE TABLE `whatsapp_template_syncs` (
	`gateway_id` text PRIMARY KEY NOT NULL,
	`synced_at` integer,
	`templates` integer DEFAULT 0 NOT NULL,
	`attempted_at` integer NOT NULL,
	`error` text,
	FOREIGN KEY (`gateway_id`) REFERENCES `gateways`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `whatsapp_templates` (
	`id` text PRIMARY KEY NOT NULL,
	`gateway_id` text NOT NULL,
	`meta_id` text,
	`name` text NOT NULL,
	`language` text NOT NULL,
	`status` text NOT NULL,
	`category` text NOT NULL,
	`parameter_format` text DEFAULT 'positional' NOT NULL,
	`components` text DEFAULT '[]' NOT NULL,
	`spec` text NOT NULL,
	`state_at` integer NOT NULL,
	`synced_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`gateway_id`) REFERENCES `gateways`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `whatsapp_templates_gateway_name_language` ON `whatsapp_templates` (`gateway_id`,`name`,`language`);--> statement-breakpoint
DROP INDEX `prices_channel_partner`;--> statement-breakpoint
ALTER TABLE `prices` ADD `category` text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE UNIQUE INDEX `prices_channel_partner` ON `prices` (`channel_type`,`partner_id`,`gateway_id`,`category`);