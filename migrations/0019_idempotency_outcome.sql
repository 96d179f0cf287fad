ALTER TABLE `idempotency_keys` ADD `outcome` text DEFAULT 'accepted' NOT NULL;--> statement-breakpoint
ALTER TABLE `idempotency_keys` DROP COLUMN `response_status`;