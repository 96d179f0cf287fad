CREATE TABLE `memberships` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`partner_id` text NOT NULL,
	`role` text NOT NULL,
	`status` text DEFAULT 'pending' NOT NULL,
	`accept_by_link` integer DEFAULT false NOT NULL,
	`invited_by` text,
	`created_at` integer NOT NULL,
	`accepted_at` integer,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`partner_id`) REFERENCES `partners`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `memberships_user_partner` ON `memberships` (`user_id`,`partner_id`);--> statement-breakpoint
CREATE INDEX `memberships_partner` ON `memberships` (`partner_id`);--> statement-breakpoint
-- Hand-written: msgd migrates inside one transaction with foreign keys on, where
-- foreign_keys=OFF does nothing; users is rebuilt below, so the rows that point at it are set
-- aside first and put back after it, with each user's partner and role as its membership.
CREATE TEMP TABLE `_users_before` AS SELECT * FROM `users`;--> statement-breakpoint
CREATE TEMP TABLE `_sessions_before` AS SELECT * FROM `ui_sessions`;--> statement-breakpoint
CREATE TEMP TABLE `_invites_before` AS SELECT * FROM `user_invites`;--> statement-breakpoint
DELETE FROM `ui_sessions`;--> statement-breakpoint
DELETE FROM `user_invites`;--> statement-breakpoint
PRAGMA foreign_keys=OFF;--> statement-breakpoint
CREATE TABLE `__new_users` (
	`id` text PRIMARY KEY NOT NULL,
	`email` text NOT NULL,
	`password_hash` text,
	`status` text DEFAULT 'active' NOT NULL,
	`sessions_valid_after` integer DEFAULT 0 NOT NULL,
	`last_login_at` integer,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
INSERT INTO `__new_users`("id", "email", "password_hash", "status", "sessions_valid_after", "last_login_at", "created_at", "updated_at") SELECT "id", "email", "password_hash", "status", "sessions_valid_after", "last_login_at", "created_at", "updated_at" FROM `users`;--> statement-breakpoint
DROP TABLE `users`;--> statement-breakpoint
ALTER TABLE `__new_users` RENAME TO `users`;--> statement-breakpoint
PRAGMA foreign_keys=ON;--> statement-breakpoint
CREATE UNIQUE INDEX `users_email_unique` ON `users` (`email`);--> statement-breakpoint
ALTER TABLE `ui_sessions` ADD `partner_id` text REFERENCES partners(id);--> statement-breakpoint
ALTER TABLE `user_invites` ADD `membership_id` text REFERENCES memberships(id);--> statement-breakpoint
-- Hand-written: a membership per user (pending while its invite is unused, and then accepted
-- through that link; disabled with the user), the person active; sessions keep their partner,
-- invite links their membership. A disabled user's sessions and unused links end here, as
-- disabling ends them now: enabling the membership must not bring them back.
INSERT INTO `memberships` (`id`, `user_id`, `partner_id`, `role`, `status`, `accept_by_link`, `invited_by`, `created_at`, `accepted_at`, `updated_at`)
  SELECT 'mem_' || substr(`id`, 5), `id`, `partner_id`, `role`,
         CASE WHEN `status` = 'disabled' THEN 'disabled' WHEN `password_hash` IS NULL THEN 'pending' ELSE 'active' END,
         `password_hash` IS NULL, NULL, `created_at`, CASE WHEN `password_hash` IS NULL THEN NULL ELSE `created_at` END, `updated_at`
    FROM `_users_before`;--> statement-breakpoint
UPDATE `users` SET `status` = 'active';--> statement-breakpoint
INSERT INTO `ui_sessions` (`id`, `hash`, `user_id`, `partner_id`, `created_at`, `last_seen_at`, `expires_at`)
  SELECT s.`id`, s.`hash`, s.`user_id`, u.`partner_id`, s.`created_at`, s.`last_seen_at`, s.`expires_at`
    FROM `_sessions_before` s JOIN `_users_before` u ON u.`id` = s.`user_id` WHERE u.`status` <> 'disabled';--> statement-breakpoint
INSERT INTO `user_invites` (`id`, `user_id`, `hash`, `kind`, `membership_id`, `expires_at`, `used_at`, `created_at`)
  SELECT i.`id`, i.`user_id`, i.`hash`, i.`kind`, CASE WHEN i.`kind` = 'invite' THEN 'mem_' || substr(i.`user_id`, 5) END,
         i.`expires_at`,
         CASE WHEN i.`used_at` IS NULL AND u.`status` = 'disabled' THEN CAST(strftime('%s', 'now') AS INTEGER) * 1000 ELSE i.`used_at` END,
         i.`created_at`
    FROM `_invites_before` i JOIN `_users_before` u ON u.`id` = i.`user_id`;--> statement-breakpoint
DROP TABLE `_users_before`;--> statement-breakpoint
DROP TABLE `_sessions_before`;--> statement-breakpoint
DROP TABLE `_invites_before`;
