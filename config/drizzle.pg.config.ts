import { defineConfig } from 'drizzle-kit';

// PostgreSQL's migrations, generated from src/db/schema-pg.ts (derived from src/db/schema.ts):
// `npm run db:generate:pg -- --name <short_name>` after `npm run db:generate`.
export default defineConfig({
  dialect: 'postgresql',
  schema: './src/db/schema-pg.ts',
  out: './migrations/pg',
});
