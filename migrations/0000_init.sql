CREATE TABLE `audit_log` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`actor` text NOT NULL,
	`action` text NOT NULL,
	`target_type` text NOT NULL,
	`target_id` text,
	`details` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `audit_created` ON `audit_log` (`created_at`);--> statement-breakpoint
CREATE TABLE `channels` (
	`id` text PRIMARY KEY NOT NULL,
	`partner_id` text NOT NULL,
	`gateway_id` text NOT NULL,
	`type` text NOT NULL,
	`sender` text NOT NULL,
	`status` text DEFAULT 'active' NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`gateway_id`) REFERENCES `gateways`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `channels_partner` ON `channels` (`partner_id`,`type`);--> statement-breakpoint
CREATE INDEX `channels_gateway` ON `channels` (`gateway_id`);--> statement-breakpoint
CREATE UNIQUE INDEX `channels_active_partner_type` ON `channels` (`partner_id`,`type`) WHERE status = 'active';--> statement-breakpoint
CREATE UNIQUE INDEX `channels_active_address` ON `channels` (`type`,`sender`) WHERE status = 'active';--> statement-breakpoint
CREATE TABLE `contacts` (
	`id` text PRIMARY KEY NOT NULL,
	`partner_id` text NOT NULL,
	`name` text,
	`phone` text,
	`email` text,
	`psid` text,
	`igsid` text,
	`attributes` text DEFAULT '{}' NOT NULL,
	`last_inbound_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `contacts_partner` ON `contacts` (`partner_id`,`id`);--> statement-breakpoint
CREATE UNIQUE INDEX `contacts_phone` ON `contacts` (`partner_id`,`phone`);--> statement-breakpoint
CREATE UNIQUE INDEX `contacts_email` ON `contacts` (`partner_id`,`email`);--> statement-breakpoint
CREATE UNIQUE INDEX `contacts_psid` ON `contacts` (`partner_id`,`psid`);--> statement-breakpoint
CREATE UNIQUE INDEX `contacts_igsid` ON `contacts` (`partner_id`,`igsid`);--> statement-breakpoint
CREATE TABLE `conversations` (
	`id` text PRIMARY KEY NOT NULL,
	`partner_id` text NOT NULL,
	`contact_id` text NOT NULL,
	`channel_type` text NOT NULL,
	`channel_id` text,
	`status` text DEFAULT 'open' NOT NULL,
	`last_message_at` integer,
	`last_inbound_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`contact_id`) REFERENCES `contacts`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `conversations_partner` ON `conversations` (`partner_id`,`id`);--> statement-breakpoint
CREATE INDEX `conversations_partner_updated` ON `conversations` (`partner_id`,`updated_at`);--> statement-breakpoint
CREATE INDEX `conversations_contact` ON `conversations` (`contact_id`,`channel_type`,`status`);--> statement-breakpoint
CREATE TABLE `cron_runs` (
	`key` text PRIMARY KEY NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `events` (
	`id` text PRIMARY KEY NOT NULL,
	`partner_id` text NOT NULL,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`fanned_out` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `events_partner` ON `events` (`partner_id`,`id`);--> statement-breakpoint
CREATE INDEX `events_pending` ON `events` (`fanned_out`);--> statement-breakpoint
CREATE TABLE `gateways` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`name` text NOT NULL,
	`settings` text DEFAULT '{}' NOT NULL,
	`secrets` text NOT NULL,
	`status` text DEFAULT 'active' NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `gateways_name_unique` ON `gateways` (`name`);--> statement-breakpoint
CREATE TABLE `idempotency_keys` (
	`partner_id` text NOT NULL,
	`key` text NOT NULL,
	`request_hash` text NOT NULL,
	`response_status` integer NOT NULL,
	`response_body` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`partner_id`, `key`)
);
--> statement-breakpoint
CREATE INDEX `idempotency_created` ON `idempotency_keys` (`created_at`);--> statement-breakpoint
CREATE TABLE `jobs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`kind` text NOT NULL,
	`payload` text NOT NULL,
	`state` text DEFAULT 'available' NOT NULL,
	`priority` integer DEFAULT 0 NOT NULL,
	`run_at` integer NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`max_attempts` integer NOT NULL,
	`locked_until` integer,
	`locked_by` text,
	`reclaims` integer DEFAULT 0 NOT NULL,
	`unique_key` text,
	`last_error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_unique_key_unique` ON `jobs` (`unique_key`);--> statement-breakpoint
CREATE INDEX `jobs_claim` ON `jobs` (`state`,`priority`,`run_at`);--> statement-breakpoint
CREATE INDEX `jobs_lease` ON `jobs` (`state`,`locked_until`);--> statement-breakpoint
CREATE TABLE `ledger_entries` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`partner_id` text NOT NULL,
	`kind` text NOT NULL,
	`amount` integer NOT NULL,
	`balance_after` integer NOT NULL,
	`message_id` text,
	`note` text,
	`actor` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `ledger_partner` ON `ledger_entries` (`partner_id`,`id`);--> statement-breakpoint
CREATE INDEX `ledger_message` ON `ledger_entries` (`message_id`);--> statement-breakpoint
CREATE TABLE `message_status_history` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`message_id` text NOT NULL,
	`status` text NOT NULL,
	`provider_status` text,
	`error_code` text,
	`error_message` text,
	`ignored` integer DEFAULT 0 NOT NULL,
	`occurred_at` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `message_status_history_message` ON `message_status_history` (`message_id`,`id`);--> statement-breakpoint
CREATE TABLE `messages` (
	`id` text PRIMARY KEY NOT NULL,
	`partner_id` text NOT NULL,
	`direction` text NOT NULL,
	`channel_type` text NOT NULL,
	`channel_id` text,
	`gateway_id` text,
	`conversation_id` text,
	`contact_id` text,
	`to` text NOT NULL,
	`from` text NOT NULL,
	`content` text NOT NULL,
	`status` text NOT NULL,
	`provider_message_id` text,
	`price` integer DEFAULT 0 NOT NULL,
	`segments` integer DEFAULT 1 NOT NULL,
	`error_code` text,
	`error_message` text,
	`dispatch_uncertain` integer DEFAULT 0 NOT NULL,
	`refunded` integer DEFAULT 0 NOT NULL,
	`sent_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `messages_partner` ON `messages` (`partner_id`,`id`);--> statement-breakpoint
CREATE INDEX `messages_conversation` ON `messages` (`conversation_id`,`id`);--> statement-breakpoint
CREATE INDEX `messages_provider` ON `messages` (`provider_message_id`);--> statement-breakpoint
CREATE TABLE `meta` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `partners` (
	`id` text PRIMARY KEY NOT NULL,
	`slug` text NOT NULL,
	`name` text NOT NULL,
	`status` text DEFAULT 'active' NOT NULL,
	`currency` text DEFAULT 'USD' NOT NULL,
	`balance` integer DEFAULT 0 NOT NULL,
	`credit_limit` integer DEFAULT 0 NOT NULL,
	`rate_limit_per_minute` integer,
	`low_balance_threshold` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `partners_slug_unique` ON `partners` (`slug`);--> statement-breakpoint
CREATE TABLE `prices` (
	`id` text PRIMARY KEY NOT NULL,
	`channel_type` text NOT NULL,
	`partner_id` text DEFAULT '' NOT NULL,
	`amount` integer NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `prices_channel_partner` ON `prices` (`channel_type`,`partner_id`);--> statement-breakpoint
CREATE TABLE `provider_event_keys` (
	`key` text PRIMARY KEY NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `provider_webhooks` (
	`id` text PRIMARY KEY NOT NULL,
	`provider` text NOT NULL,
	`gateway_id` text,
	`method` text NOT NULL,
	`path` text NOT NULL,
	`headers` text NOT NULL,
	`body` blob,
	`verification` text NOT NULL,
	`verification_reason` text,
	`processing` text NOT NULL,
	`error` text,
	`received_at` integer NOT NULL,
	`processed_at` integer
);
--> statement-breakpoint
CREATE INDEX `provider_webhooks_received` ON `provider_webhooks` (`received_at`);--> statement-breakpoint
CREATE INDEX `provider_webhooks_provider` ON `provider_webhooks` (`provider`,`received_at`);--> statement-breakpoint
CREATE TABLE `tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`partner_id` text NOT NULL,
	`name` text NOT NULL,
	`scopes` text NOT NULL,
	`prefix` text NOT NULL,
	`hash` text NOT NULL,
	`expires_at` integer,
	`revoked_at` integer,
	`last_used_at` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `tokens_hash_unique` ON `tokens` (`hash`);--> statement-breakpoint
CREATE INDEX `tokens_partner` ON `tokens` (`partner_id`);--> statement-breakpoint
CREATE TABLE `webhook_attempts` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`delivery_id` text NOT NULL,
	`attempt_no` integer NOT NULL,
	`status_code` integer,
	`duration_ms` integer NOT NULL,
	`response_snippet` text,
	`error` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `webhook_attempts_delivery` ON `webhook_attempts` (`delivery_id`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_attempts_created` ON `webhook_attempts` (`created_at`);--> statement-breakpoint
CREATE TABLE `webhook_deliveries` (
	`id` text PRIMARY KEY NOT NULL,
	`event_id` text NOT NULL,
	`endpoint_id` text NOT NULL,
	`partner_id` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` integer,
	`last_status_code` integer,
	`last_error` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `webhook_deliveries_event_endpoint` ON `webhook_deliveries` (`event_id`,`endpoint_id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_endpoint` ON `webhook_deliveries` (`endpoint_id`,`id`);--> statement-breakpoint
CREATE INDEX `webhook_deliveries_status` ON `webhook_deliveries` (`status`,`id`);--> statement-breakpoint
CREATE TABLE `webhook_endpoints` (
	`id` text PRIMARY KEY NOT NULL,
	`partner_id` text NOT NULL,
	`url` text NOT NULL,
	`description` text,
	`events` text,
	`secret` text NOT NULL,
	`previous_secret` text,
	`previous_secret_expires_at` integer,
	`status` text DEFAULT 'enabled' NOT NULL,
	`disabled_reason` text,
	`failing_since` integer,
	`deleted_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `webhook_endpoints_partner` ON `webhook_endpoints` (`partner_id`);