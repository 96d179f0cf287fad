ALTER TABLE "heartbeat" ALTER COLUMN "id" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "heartbeat" ADD COLUMN "leader" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "heartbeat" ADD COLUMN "counters" text COLLATE "C" DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE "heartbeat" ADD COLUMN "dead_at" bigint;