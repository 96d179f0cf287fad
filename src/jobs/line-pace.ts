// The calls of each gateway's line that this msgd makes when the lines are shared (PostgreSQL,
// src/jobs/shared-lines.ts): each at its slot at the soonest, in the order of their slots, and
// spaced. A claim's calls reach their handlers when its transaction commits, in the order the
// claim found the jobs: a commit later than some of their slots would otherwise send those at
// once, together, and in the claim's order rather than the line's. A line that fell behind this
// way catches up gradually: its calls from this msgd go at least CATCH_UP of a slot apart, so
// the lateness shrinks by a fifth of a slot a call, without a burst.

/** The least spacing of a line's calls from this msgd, as a share of its slot. */
const CATCH_UP = 0.8;

interface Waiting {
  at: number;
  intervalMs: number;
  go: () => void;
}

interface Line {
  /** By slot; calls with the same slot in the order they came. */
  waiting: Waiting[];
  /** When the last call went (msgd's clock). */
  last: number;
  timer: ReturnType<typeof setTimeout> | null;
}

export class LinePace {
  private readonly lines = new Map<string, Line>();

  constructor(private readonly now: () => number) {}

  /**
   * Resolves when the call whose slot is `at` (msgd's clock) on line `key` may go: at its slot,
   * after the calls with earlier slots asked for here, and CATCH_UP of `intervalMs` (its slot)
   * after the last one that went at the soonest. Calls asked for in one turn of the event loop
   * are all ordered before any goes.
   */
  turn(key: string, at: number, intervalMs: number): Promise<void> {
    let line = this.lines.get(key);
    if (line === undefined) {
      line = { waiting: [], last: Number.NEGATIVE_INFINITY, timer: null };
      this.lines.set(key, line);
    }
    const l = line;
    return new Promise<void>((go) => {
      let i = l.waiting.length;
      while (i > 0 && l.waiting[i - 1]!.at > at) i--;
      l.waiting.splice(i, 0, { at, intervalMs, go });
      this.arm(key, l);
    });
  }

  private arm(key: string, line: Line): void {
    if (line.timer !== null) clearTimeout(line.timer);
    line.timer = null;
    const head = line.waiting[0];
    // A line that nothing waits on keeps its last call's time (one small entry per gateway).
    if (head === undefined) return;
    const due = Math.max(head.at, line.last + CATCH_UP * head.intervalMs);
    // A timer even when due: the calls of one claim, started together, are all in line first.
    line.timer = setTimeout(() => this.release(key, line), Math.max(0, due - this.now()));
  }

  private release(key: string, line: Line): void {
    line.timer = null;
    const head = line.waiting.shift()!;
    line.last = this.now();
    head.go();
    this.arm(key, line);
  }
}
