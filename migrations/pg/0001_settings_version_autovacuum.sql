-- Hand-written: what drizzle-kit does not know about. The same triggers as SQLite's (migration
-- 0005 there), plpgsql here, and storage parameters for the tables that churn.
--
-- settings_version moves whenever something a request's checks read changes: tokens, partners
-- (but not their balance), gateways, channels, prices. msgd keeps those in memory and looks at
-- this one number once per event-loop turn (src/core/settings-version.ts), so a change by msgctl
-- or another msgd still takes effect on the next request. Row-level, as SQLite's triggers are.
INSERT INTO "meta" ("key", "value") VALUES ('settings_version', '0') ON CONFLICT ("key") DO NOTHING;--> statement-breakpoint
CREATE FUNCTION "settings_version_bump"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE "meta" SET "value" = ("value"::bigint + 1)::text WHERE "key" = 'settings_version';
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "settings_version_tokens_insert" AFTER INSERT ON "tokens" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_tokens_update" AFTER UPDATE OF "partner_id", "scopes", "hash", "expires_at", "revoked_at" ON "tokens" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_tokens_delete" AFTER DELETE ON "tokens" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_gateways_insert" AFTER INSERT ON "gateways" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_gateways_update" AFTER UPDATE ON "gateways" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_gateways_delete" AFTER DELETE ON "gateways" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_channels_insert" AFTER INSERT ON "channels" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_channels_update" AFTER UPDATE ON "channels" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_channels_delete" AFTER DELETE ON "channels" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_prices_insert" AFTER INSERT ON "prices" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_prices_update" AFTER UPDATE ON "prices" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_prices_delete" AFTER DELETE ON "prices" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_partners_insert" AFTER INSERT ON "partners" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_partners_update" AFTER UPDATE OF "slug", "name", "status", "currency", "credit_limit", "rate_limit_per_minute", "low_balance_threshold" ON "partners" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
CREATE TRIGGER "settings_version_partners_delete" AFTER DELETE ON "partners" FOR EACH ROW EXECUTE FUNCTION "settings_version_bump"();--> statement-breakpoint
-- jobs is a queue: every job is inserted, updated when claimed and deleted when done, so dead
-- rows and index entries pile up at the dispatch rate. Vacuum it after 1 % of its rows changed
-- (the default is 20 %: 200,000 dead rows under a backlog of a million), and analyze it often
-- enough that the planner knows the size of the runnable set the claim reads.
ALTER TABLE "jobs" SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02);--> statement-breakpoint
-- Every accepted send updates its partner's balance. Neither balance nor updated_at is indexed,
-- so the update can be HOT (no index entry, the old version pruned on the page) when the page
-- has room: keep half of each page free for them.
ALTER TABLE "partners" SET (fillfactor = 50);--> statement-breakpoint
-- Rows updated several times each (a message's statuses, an event fanned out, a delivery's
-- attempts) in tables that only grow between retention runs: vacuum after 5 % changed, not 20 %.
ALTER TABLE "messages" SET (autovacuum_vacuum_scale_factor = 0.05);--> statement-breakpoint
ALTER TABLE "events" SET (autovacuum_vacuum_scale_factor = 0.05);--> statement-breakpoint
ALTER TABLE "webhook_deliveries" SET (autovacuum_vacuum_scale_factor = 0.05);
