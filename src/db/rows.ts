import type { InferSelectModel, Table } from 'drizzle-orm';

// The house way to query (docs/architecture.md): SQL written out and run through stmt(), rows
// in the columns' own snake_case names, typed from the drizzle schema rather than by hand, so
// a column renamed or retyped in schema.ts breaks the code that reads it at compile time.

type Columns<T extends Table> = T['_']['columns'];

/** A whole row of the table as `SELECT *` returns it: SQL column names, schema types. */
export type Row<T extends Table> = {
  [K in keyof Columns<T> & keyof InferSelectModel<T> as Columns<T>[K]['_']['name']]: InferSelectModel<T>[K];
};
