// Provider calls in flight per connection pool (an HTTP origin, an SMTP gateway's sessions),
// at most as many as the pool has connections. A call beyond them would wait in the client's
// own queue, where msgd cannot tell it from one on the wire; waiting here instead, a call is
// known not to have left msgd until it holds a slot. First come, first served.

import type { CallPool } from '../providers/types.js';

export class CallSlots {
  private readonly busy = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();

  /** `perKey`: the size of a pool that does not say its own. */
  constructor(private readonly perKey: number) {}

  /** Free slots in the pool now (none while calls wait for one). */
  free(pool: CallPool): number {
    if (this.waiting.get(pool.key)?.length) return 0;
    return (pool.size ?? this.perKey) - (this.busy.get(pool.key) ?? 0);
  }

  /** Takes a slot if one is free now. */
  tryTake(pool: CallPool): boolean {
    if (this.free(pool) <= 0) return false;
    this.busy.set(pool.key, (this.busy.get(pool.key) ?? 0) + 1);
    return true;
  }

  /** Resolves once a slot is ours. */
  take(pool: CallPool): Promise<void> {
    if (this.tryTake(pool)) return Promise.resolve();
    return new Promise((resolve) => {
      const line = this.waiting.get(pool.key);
      if (line) line.push(resolve);
      else this.waiting.set(pool.key, [resolve]);
    });
  }

  /** Gives a slot back: to the first call waiting for one, if any. */
  give(pool: CallPool): void {
    const key = pool.key;
    const line = this.waiting.get(key);
    const next = line?.shift();
    if (line?.length === 0) this.waiting.delete(key);
    if (next) return next();
    const n = (this.busy.get(key) ?? 1) - 1;
    if (n > 0) this.busy.set(key, n);
    else this.busy.delete(key);
  }

  /** Calls waiting for a slot, over every pool. */
  get waitingCount(): number {
    let n = 0;
    for (const line of this.waiting.values()) n += line.length;
    return n;
  }
}
