import { formatMoney } from '../lib/money.js';
import { safeLine, safeText } from '../lib/terminal-text.js';
import { iso } from '../lib/time.js';
import type { CliWritable } from './io.js';

// The output layer: commands return a Result and never write to stdout themselves, so
// --json can promise that stdout holds nothing but one JSON document.

export interface Result {
  /** The document printed with --json (stable snake_case fields). */
  json: unknown;
  /** What a person reads in text mode. */
  text: string;
  /** Text mode only, on stderr: warnings a script must not parse as data. */
  notices?: string[];
  /** A non-error outcome that still must fail the process (doctor); one line on stderr. */
  failure?: string;
}

export function emit(
  result: Result,
  json: boolean,
  out: { stdout: CliWritable; stderr: CliWritable } = process,
): number {
  if (json) {
    out.stdout.write(JSON.stringify(result.json, null, 2) + '\n');
  } else {
    if (result.text) out.stdout.write(terminalSafe(result.text.endsWith('\n') ? result.text : result.text + '\n'));
    for (const n of result.notices ?? []) out.stderr.write(n + '\n');
  }
  if (result.failure) {
    out.stderr.write(`msgctl: ${result.failure}\n`);
    return 1;
  }
  return 0;
}

type Cell = string | number | null | undefined;

/** A table cell or a value: one line, nothing a terminal acts on (a name's newline never splits a row). */
function cell(v: Cell): string {
  return v === null || v === undefined || v === '' ? '-' : safeLine(v);
}

/**
 * An aligned table with a header row. Columns listed in `right` are right-aligned
 * (amounts), so decimal points line up when the decimals agree.
 */
export function table(headers: string[], rows: Cell[][], opts: { right?: number[] } = {}): string {
  const right = new Set(opts.right ?? []);
  const body = rows.map((r) => r.map(cell));
  const widths = headers.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) =>
    r
      .map((v, i) => (right.has(i) ? v.padStart(widths[i]) : v.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers.map((h) => h.toUpperCase())), ...body.map(line)].join('\n');
}

/** Aligned "key  value" lines for one record. */
export function kv(pairs: [string, Cell][], indent = ''): string {
  const width = Math.max(...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${indent}${k.padEnd(width)}  ${cell(v)}`.trimEnd()).join('\n');
}

export function money(micro: number | bigint, currency?: string | null): string {
  return currency ? `${formatMoney(micro)} ${currency}` : formatMoney(micro);
}

/** A timestamp for tables: UTC, to the second, without the ISO noise. */
export function when(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '-';
  return iso(ms).slice(0, 19).replace('T', ' ');
}

/** "1 partner", "3 partners": a count with its noun agreeing (plural given when not noun + s). */
export function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : plural}`;
}

export const lines = (...parts: (string | false | null | undefined)[]) =>
  parts.filter((p) => p !== false && p != null).join('\n');

/**
 * Text as a terminal should see it: control characters and bidi overrides shown as \u escapes,
 * not obeyed (lib/terminal-text.ts, shared with the console). Text shown to the operator can
 * come from anyone on the internet (a webhook body, a contact name).
 */
export function terminalSafe(text: string): string {
  return safeText(text);
}
