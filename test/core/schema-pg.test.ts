import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type DrizzleSnapshotJSON, generateDrizzleJson, generateMigration } from 'drizzle-kit/api';
import { describe, expect, it } from 'vitest';
import { PG_MIGRATIONS_DIR } from '../../src/db/pg/migrate.js';
import * as pgSchema from '../../src/db/schema-pg.js';

// PostgreSQL's migrations are generated from src/db/schema-pg.ts, which follows schema.ts: a
// schema change without `npm run db:generate:pg` leaves migrations/pg/ behind. Checked without
// a PostgreSQL server, so the SQLite suite catches it too.

describe('migrations/pg', () => {
  it('are up to date with the schema (npm run db:generate:pg)', async () => {
    const meta = join(PG_MIGRATIONS_DIR, 'meta');
    const latest = readdirSync(meta)
      .filter((f) => f.endsWith('_snapshot.json'))
      .sort()
      .at(-1) as string;
    const snapshot = JSON.parse(readFileSync(join(meta, latest), 'utf8')) as DrizzleSnapshotJSON;
    const current = generateDrizzleJson(pgSchema as Record<string, unknown>, snapshot.id);
    expect(await generateMigration(snapshot, current)).toEqual([]);
  });
});
