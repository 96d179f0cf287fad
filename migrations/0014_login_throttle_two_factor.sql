CREATE TABLE `login_attempts` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account` text,
	`address` text NOT NULL,
	`at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `login_attempts_account` ON `login_attempts` (`account`,`at`);--> statement-breakpoint
CREATE INDEX `login_attempts_address` ON `login_attempts` (`address`,`at`);--> statement-breakpoint
CREATE INDEX `login_attempts_at` ON `login_attempts` (`at`);--> statement-breakpoint
CREATE TABLE `ui_pending_logins` (
	`id` text PRIMARY KEY NOT NULL,
	`hash` text NOT NULL,
	`user_id` text NOT NULL,
	`attempt` integer NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `ui_pending_logins_hash_unique` ON `ui_pending_logins` (`hash`);--> statement-breakpoint
CREATE INDEX `ui_pending_logins_user` ON `ui_pending_logins` (`user_id`);--> statement-breakpoint
CREATE TABLE `user_recovery_codes` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`hash` text NOT NULL,
	`used_at` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `user_recovery_codes_hash_unique` ON `user_recovery_codes` (`hash`);--> statement-breakpoint
CREATE INDEX `user_recovery_codes_user` ON `user_recovery_codes` (`user_id`);--> statement-breakpoint
ALTER TABLE `partners` ADD `require_2fa` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `users` ADD `totp_secret` text;--> statement-breakpoint
ALTER TABLE `users` ADD `totp_enabled_at` integer;--> statement-breakpoint
ALTER TABLE `users` ADD `totp_last_step` integer;