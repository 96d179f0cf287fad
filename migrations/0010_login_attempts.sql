CREATE TABLE `login_attempts` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`account` text,
	`address` text NOT NULL,
	`at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `login_attempts_account` ON `login_attempts` (`account`,`at`);--> statement-breakpoint
CREATE INDEX `login_attempts_address` ON `login_attempts` (`address`,`at`);--> statement-breakpoint
CREATE INDEX `login_attempts_at` ON `login_attempts` (`at`);