import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { pinConnection } from '../../src/db/pin.js';
import { render, sql } from '../../src/db/sql.js';

// The sql`` tag's rendering for both dialects, checked without a server; bound values run on
// SQLite here, and on PostgreSQL in test/both/ (every query there goes through it).

describe('sql``', () => {
  it('renders placeholders per dialect and keeps the values apart', () => {
    const id = "p1'; DROP TABLE partners; --";
    const q = sql`SELECT * FROM partners WHERE id = ${id} AND balance > ${5}`;
    expect(render(q, 'sqlite')).toEqual({
      text: 'SELECT * FROM partners WHERE id = ? AND balance > ?',
      values: [id, 5],
    });
    expect(render(q, 'postgres')).toEqual({
      text: 'SELECT * FROM partners WHERE id = $1 AND balance > $2',
      values: [id, 5],
    });
  });

  it('splices fragments with their values in order, numbering PostgreSQL placeholders through', () => {
    const status = sql`status = ${'sent'}`;
    const ids = ['a', 'b', 'c'];
    const q = sql`SELECT id FROM messages WHERE partner_id = ${'p1'} AND ${status} AND id IN (${sql.join(ids.map((i) => sql`${i}`))}) LIMIT ${10}`;
    expect(render(q, 'postgres')).toEqual({
      text: 'SELECT id FROM messages WHERE partner_id = $1 AND status = $2 AND id IN ($3, $4, $5) LIMIT $6',
      values: ['p1', 'sent', 'a', 'b', 'c', 10],
    });
    expect(render(q, 'sqlite').text).toBe(
      'SELECT id FROM messages WHERE partner_id = ? AND status = ? AND id IN (?, ?, ?) LIMIT ?',
    );
  });

  it('splices raw text and an empty join as text only', () => {
    const q = sql`SELECT ${sql.raw('count(*)')} FROM ${sql.raw('jobs')} WHERE 1 ${sql.join([])}`;
    expect(render(q, 'postgres')).toEqual({ text: 'SELECT count(*) FROM jobs WHERE 1 ', values: [] });
  });

  it('runs on SQLite with hostile values bound, not spliced', () => {
    // Pinned: no connection of msgd's may become garbage (src/db/pin.ts).
    const db = pinConnection(new Database(':memory:'));
    db.exec('CREATE TABLE t (v TEXT)');
    const hostile = "x'); DELETE FROM t; --\u0000<b>";
    for (const v of ['a', hostile]) {
      const r = render(sql`INSERT INTO t (v) VALUES (${v})`, 'sqlite');
      db.prepare(r.text).run(...r.values);
    }
    const r = render(sql`SELECT v FROM t WHERE v = ${hostile}`, 'sqlite');
    expect(db.prepare(r.text).all(...r.values)).toEqual([{ v: hostile }]);
    expect(db.prepare('SELECT count(*) AS n FROM t').get()).toEqual({ n: 2 });
    db.close();
  });
});
