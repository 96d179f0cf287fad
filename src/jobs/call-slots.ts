// Provider calls in flight per provider endpoint, at most as many as the HTTP client keeps
// connections to it (dispatch.connectionsPerOrigin). A call beyond them would wait in the
// client's own queue, where msgd cannot tell it from one on the wire; waiting here instead, a
// call is known not to have left msgd until it holds a slot. First come, first served.

export class CallSlots {
  private readonly busy = new Map<string, number>();
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(private readonly perKey: number) {}

  /** Free slots for `key` now (none while calls wait for one). */
  free(key: string): number {
    if (this.waiting.get(key)?.length) return 0;
    return this.perKey - (this.busy.get(key) ?? 0);
  }

  /** Takes a slot if one is free now. */
  tryTake(key: string): boolean {
    if (this.free(key) <= 0) return false;
    this.busy.set(key, (this.busy.get(key) ?? 0) + 1);
    return true;
  }

  /** Resolves once a slot is ours. */
  take(key: string): Promise<void> {
    if (this.tryTake(key)) return Promise.resolve();
    return new Promise((resolve) => {
      const line = this.waiting.get(key);
      if (line) line.push(resolve);
      else this.waiting.set(key, [resolve]);
    });
  }

  /** Gives a slot back: to the first call waiting for one, if any. */
  give(key: string): void {
    const line = this.waiting.get(key);
    const next = line?.shift();
    if (line?.length === 0) this.waiting.delete(key);
    if (next) return next();
    const n = (this.busy.get(key) ?? 1) - 1;
    if (n > 0) this.busy.set(key, n);
    else this.busy.delete(key);
  }

  /** Calls waiting for a slot, over every key. */
  get waitingCount(): number {
    let n = 0;
    for (const line of this.waiting.values()) n += line.length;
    return n;
  }
}
