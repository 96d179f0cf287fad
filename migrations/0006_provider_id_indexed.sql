-- Messages whose provider reports all carry msgd's own id (Twilio's StatusCallback URL names
-- the message) or that get none (SMTP) no longer need an entry in
-- messages_provider: settling such a send then writes no random index page. Every existing row
-- keeps provider_id_indexed = 1 (the column's default; adding it rewrites no row), so the rebuilt
-- index holds exactly what the old one did and reports for messages sent before the upgrade
-- still find them.
DROP INDEX `messages_provider`;--> statement-breakpoint
ALTER TABLE `messages` ADD `provider_id_indexed` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
CREATE INDEX `messages_provider` ON `messages` (`provider_message_id`) WHERE provider_message_id IS NOT NULL AND provider_id_indexed = 1;
