CREATE TABLE "gateway_lines" (
	"gateway_id" text COLLATE "C" PRIMARY KEY NOT NULL,
	"line" bigint DEFAULT 0 NOT NULL,
	"interval_us" bigint NOT NULL,
	"active" bigint NOT NULL,
	"tat" bigint DEFAULT 0 NOT NULL,
	"next_go" bigint DEFAULT 0 NOT NULL,
	"updated_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "gateway_places" (
	"job_id" bigint PRIMARY KEY NOT NULL,
	"gateway_id" text COLLATE "C" NOT NULL,
	"line" bigint NOT NULL,
	"at" bigint NOT NULL,
	"respaced" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE INDEX "gateway_places_gateway" ON "gateway_places" USING btree ("gateway_id");