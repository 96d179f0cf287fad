ALTER TABLE `messages` ADD `dispatch_in_flight` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- Messages a running msgd of the previous version had claimed: their request may have left.
UPDATE `messages` SET `dispatch_in_flight` = 1 WHERE `status` = 'sending';
