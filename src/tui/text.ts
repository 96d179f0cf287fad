import { formatMoney } from '../lib/money.js';
import { safeLine } from '../lib/terminal-text.js';

// Text the console draws: anything from outside (a webhook body, a partner's name) is shown,
// never obeyed by the terminal, and cut to the width it has.

/** One line as the terminal must see it: lib/terminal-text.ts's safeLine, shared with msgctl. */
export function clean(text: string | number | null | undefined): string {
  return safeLine(text);
}

/** Cut to `width` columns, with … when cut; padded on the right (or left, for figures). */
export function fit(text: string, width: number, align: 'left' | 'right' = 'left'): string {
  if (width <= 0) return '';
  const t = text.length > width ? `${text.slice(0, Math.max(0, width - 1))}…` : text;
  return align === 'right' ? t.padStart(width) : t.padEnd(width);
}

export function money(micro: number, currency?: string | null): string {
  return currency ? `${formatMoney(micro)} ${currency}` : formatMoney(micro);
}

export function when(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '-';
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

export function clock(ms: number): string {
  return new Date(ms).toISOString().slice(11, 19);
}

export function duration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s % 60}s`;
  return `${s % 60}s`;
}

export function count(n: number, cap = Infinity): string {
  return n >= cap ? `${n.toLocaleString('en-US')}+` : n.toLocaleString('en-US');
}
