ALTER TABLE `messages` ADD `send_at` integer;--> statement-breakpoint
CREATE INDEX `messages_partner_scheduled` ON `messages` (`partner_id`,`id`) WHERE status = 'scheduled';