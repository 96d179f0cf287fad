DROP INDEX `jobs_unique_key_unique`;--> statement-breakpoint
CREATE UNIQUE INDEX `jobs_unique_key` ON `jobs` (`unique_key`) WHERE unique_key IS NOT NULL;--> statement-breakpoint
DROP INDEX `messages_provider`;--> statement-breakpoint
CREATE INDEX `messages_provider` ON `messages` (`provider_message_id`) WHERE provider_message_id IS NOT NULL;--> statement-breakpoint
-- settings_version moves whenever something a request's checks read changes: tokens, partners
-- (but not their balance), gateways, channels, prices. msgd keeps those in memory and looks at
-- this one number once per event-loop turn (src/core/settings-version.ts), so a change by msgctl
-- still takes effect on the next request.
INSERT OR IGNORE INTO `meta` (`key`, `value`) VALUES ('settings_version', '0');--> statement-breakpoint
CREATE TRIGGER `settings_version_tokens_insert` AFTER INSERT ON `tokens` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_tokens_update` AFTER UPDATE OF `partner_id`, `scopes`, `hash`, `expires_at`, `revoked_at` ON `tokens` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_tokens_delete` AFTER DELETE ON `tokens` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_gateways_insert` AFTER INSERT ON `gateways` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_gateways_update` AFTER UPDATE ON `gateways` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_gateways_delete` AFTER DELETE ON `gateways` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_channels_insert` AFTER INSERT ON `channels` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_channels_update` AFTER UPDATE ON `channels` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_channels_delete` AFTER DELETE ON `channels` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_prices_insert` AFTER INSERT ON `prices` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_prices_update` AFTER UPDATE ON `prices` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_prices_delete` AFTER DELETE ON `prices` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_partners_insert` AFTER INSERT ON `partners` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_partners_update` AFTER UPDATE OF `slug`, `name`, `status`, `currency`, `credit_limit`, `rate_limit_per_minute`, `low_balance_threshold` ON `partners` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;--> statement-breakpoint
CREATE TRIGGER `settings_version_partners_delete` AFTER DELETE ON `partners` BEGIN UPDATE `meta` SET `value` = CAST(`value` AS INTEGER) + 1 WHERE `key` = 'settings_version'; END;
