CREATE TABLE "api_rate_limits" (
	"key" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tat" double precision NOT NULL,
	"taken" bigint DEFAULT 0 NOT NULL
);--> statement-breakpoint
-- Hand-written: the API limits' state is rewritten by every batch of requests and means nothing
-- after a crash. Unlogged, its updates write no WAL and commit without waiting for a WAL flush.
ALTER TABLE "api_rate_limits" SET UNLOGGED;
