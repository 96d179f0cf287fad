// One query, two dialects. A query is written once with the sql`` tag, its values kept apart
// from its text; each store renders it with its own placeholders: `?` for SQLite, `$1`, `$2`…
// for PostgreSQL. A value that is itself a query (a fragment) is spliced in with its own values,
// so conditions can be built up without string concatenation; sql.raw() splices trusted text
// (a column or table name from the code, never input).

/** A query or fragment: the literal parts around its values (`strings.length === values.length + 1`). */
export interface Sql {
  readonly strings: readonly string[];
  readonly values: readonly unknown[];
}

/** The text a store runs and the values bound to its placeholders, in order. */
export interface Rendered {
  readonly text: string;
  readonly values: unknown[];
}

export type Dialect = 'sqlite' | 'postgres';

const SQL = Symbol('sql');

interface Fragment extends Sql {
  readonly [SQL]: true;
}

function isSql(v: unknown): v is Fragment {
  return typeof v === 'object' && v !== null && (v as Partial<Fragment>)[SQL] === true;
}

function make(strings: readonly string[], values: readonly unknown[]): Fragment {
  return { [SQL]: true, strings, values };
}

/** sql`SELECT … WHERE id = ${id}`: values never become part of the text. */
export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  if (!values.some(isSql)) return make(strings, values);
  // Flatten fragments, so rendering sees one list of literal parts and plain values.
  const outStrings: string[] = [strings[0]];
  const outValues: unknown[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (isSql(v)) {
      outStrings[outStrings.length - 1] += v.strings[0];
      for (let j = 0; j < v.values.length; j++) {
        outValues.push(v.values[j]);
        outStrings.push(v.strings[j + 1]);
      }
      outStrings[outStrings.length - 1] += strings[i + 1];
    } else {
      outValues.push(v);
      outStrings.push(strings[i + 1]);
    }
  }
  return make(outStrings, outValues);
}

/** Trusted text spliced in as it is: identifiers and keywords from the code, never input. */
sql.raw = (text: string): Sql => make([text], []);

/** The fragments joined by `separator` (default `, `): `IN (${sql.join(ids.map((id) => sql`${id}`))})`. */
sql.join = (parts: readonly Sql[], separator = ', '): Sql => {
  if (parts.length === 0) return make([''], []);
  const strings: string[] = [...parts[0].strings];
  const values: unknown[] = [...parts[0].values];
  for (let p = 1; p < parts.length; p++) {
    const part = parts[p];
    strings[strings.length - 1] += separator + part.strings[0];
    for (let j = 0; j < part.values.length; j++) {
      values.push(part.values[j]);
      strings.push(part.strings[j + 1]);
    }
  }
  return make(strings, values);
};

// The text of a query depends only on its literal parts and the dialect. A tagged template's
// strings array is one object per call site for the life of the process, so its text is built
// once per dialect; flattened queries get a new array each time and are joined again.
const texts: Record<Dialect, WeakMap<readonly string[], string>> = {
  sqlite: new WeakMap(),
  postgres: new WeakMap(),
};

function join(strings: readonly string[], dialect: Dialect): string {
  let text = strings[0];
  for (let i = 1; i < strings.length; i++) text += (dialect === 'sqlite' ? '?' : `$${i}`) + strings[i];
  return text;
}

/** The query's text in `dialect`'s placeholders, and its values. */
export function render(q: Sql, dialect: Dialect): Rendered {
  const cache = texts[dialect];
  let text = cache.get(q.strings);
  if (text === undefined) {
    text = join(q.strings, dialect);
    cache.set(q.strings, text);
  }
  return { text, values: q.values as unknown[] };
}
