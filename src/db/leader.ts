// One instance among those sharing a store leads: it runs what must run once per cluster and
// is not a queue job (timers outside the queue, the gauges read from the database that metrics
// export). On SQLite the one process holding the data directory is the leader, for as long as
// it runs; on PostgreSQL the instance holding a session advisory lock (src/db/pg/leader.ts).

export interface Leader {
  /** Whether this instance leads now. */
  isLeader(): boolean;
  /**
   * Calls fn(true) when this instance becomes the leader and fn(false) when it stops being it
   * (its lock lost, or msgd stopping). Not called for the state at the time of the call: read
   * isLeader() for that. Returns a function that stops the calls.
   */
  onChange(fn: (leader: boolean) => void): () => void;
  /** Gives the leadership up (listeners hear false) and stops trying to take it. */
  close(): Promise<void>;
}

/** Listeners of a Leader, each called in turn; one that throws does not stop the others. */
export class LeaderListeners {
  private readonly fns = new Set<(leader: boolean) => void>();

  constructor(private readonly onError: (err: unknown) => void) {}

  add(fn: (leader: boolean) => void): () => void {
    this.fns.add(fn);
    return () => {
      this.fns.delete(fn);
    };
  }

  emit(leader: boolean): void {
    for (const fn of [...this.fns]) {
      try {
        fn(leader);
      } catch (err) {
        this.onError(err);
      }
    }
  }
}

/** SQLite's leader: the one process, from its start until close(). */
export function soleLeader(onError: (err: unknown) => void = () => {}): Leader {
  let leading = true;
  const listeners = new LeaderListeners(onError);
  return {
    isLeader: () => leading,
    onChange: (fn) => listeners.add(fn),
    async close() {
      if (!leading) return;
      leading = false;
      listeners.emit(false);
    },
  };
}
