import type { CoreCtx } from '../../core/context.js';
import {
  TAIL_WINDOW,
  attemptsAfter,
  latestAttempts,
  latestWebhooks,
  webhooksAfter,
  webhooksByIds,
  type AttemptRow,
  type TailRow,
} from './tail.js';

// The live tail's memory: the newest rows, extended each poll by the rows after the last one
// seen, with rows that were still pending read again until they settle.

/** Pending rows looked at again per poll (the newest ones). */
const RECHECK = 200;

export class TailState {
  rows: TailRow[] = [];
  attempts: AttemptRow[] = [];
  /** Moves when rows or attempts change: an unchanged tail is not drawn again. */
  version = 0;
  private lastAttempt: number | null = null;
  private polling: Promise<void> | null = null;

  constructor(private readonly ctx: CoreCtx) {}

  /**
   * The provider webhooks, through the store, on every tick. A poll asked for while one is
   * still reading joins it: two at once would both append the same new rows.
   */
  poll(): Promise<void> {
    this.polling ??= this.read().finally(() => {
      this.polling = null;
    });
    return this.polling;
  }

  private async read(): Promise<void> {
    const ctx = this.ctx;
    if (this.rows.length === 0) {
      this.rows = await latestWebhooks(ctx);
      if (this.rows.length) this.version++;
    } else {
      const pending = this.rows.filter((r) => r.processing === 'pending').slice(-RECHECK);
      if (pending.length) {
        const now = new Map(
          (
            await webhooksByIds(
              ctx,
              pending.map((r) => r.id),
            )
          ).map((r) => [r.id, r]),
        );
        if ([...now.values()].some((r) => r.processing !== 'pending')) {
          this.rows = this.rows.map((r) => now.get(r.id) ?? r);
          this.version++;
        }
      }
      const fresh = await webhooksAfter(ctx, this.rows[this.rows.length - 1].id);
      if (fresh.length) {
        this.rows = [...this.rows, ...fresh].slice(-TAIL_WINDOW);
        this.version++;
      }
    }
  }

  /** The deliveries to partners (attempts) since the last read, through the store. */
  async pollOutbound(): Promise<void> {
    const ctx = this.ctx;
    if (this.lastAttempt === null) {
      this.attempts = await latestAttempts(ctx);
      this.version++;
    } else {
      const fresh = await attemptsAfter(ctx, this.lastAttempt);
      if (fresh.length) {
        this.attempts = [...this.attempts, ...fresh].slice(-TAIL_WINDOW);
        this.version++;
      }
    }
    this.lastAttempt = this.attempts.length ? this.attempts[this.attempts.length - 1].id : 0;
  }
}

export type Verdict = 'verified' | 'bad signature' | 'unroutable' | 'pending' | 'rejected' | 'other';

/** What became of a webhook, in the operator's words. */
export function verdictOf(r: Pick<TailRow, 'verification' | 'processing'>): Verdict {
  if (r.verification === 'failed') return 'bad signature';
  if (r.processing === 'unroutable') return 'unroutable';
  if (r.processing === 'pending') return 'pending';
  if (r.processing === 'rejected') return 'rejected';
  if (r.verification === 'ok') return 'verified';
  return 'other';
}

export interface TailFilter {
  provider: string;
  gateway: string;
  verdict: string;
  /** Free text, found in any of the row's words (id, path, gateway, error, its events' note). */
  text: string;
}

export const NO_FILTER: TailFilter = { provider: '', gateway: '', verdict: '', text: '' };

export const filtered = (f: TailFilter) => !!(f.provider || f.gateway || f.verdict || f.text.trim());

/** `words` gives the row's searchable text beyond its own fields (gateway name, event note). */
export function matches(r: TailRow, f: TailFilter, words: (r: TailRow) => string = () => ''): boolean {
  if (f.provider && r.provider !== f.provider) return false;
  if (f.gateway && r.gateway_id !== f.gateway) return false;
  if (f.verdict && verdictOf(r) !== f.verdict) return false;
  const text = f.text.trim().toLowerCase();
  if (text) {
    const hay = [r.id, r.provider, r.path, r.processing, verdictOf(r), r.error, r.verification_reason, words(r)]
      .join(' ')
      .toLowerCase();
    if (!hay.includes(text)) return false;
  }
  return true;
}
