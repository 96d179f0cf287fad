// The states the worker loop moves between (src/queue/worker.ts), each with what moves it.

/**
 * The worker's life: `stopped` (no timers, nothing claimed), `running` (claims and settles),
 * `stopping` (claims nothing more; running jobs finish, or are handed back at the timeout).
 */
export type Life = 'stopped' | 'running' | 'stopping';

/**
 * Whether the next turn claims: `claiming` while work may be waiting (start, an enqueue, a
 * timer, a job put back due now), `sleeping` once a claim came back short, until one of those
 * wakes it. Finished jobs are settled in either.
 */
export type Loop = 'claiming' | 'sleeping';

/** The one timer that ends a sleep, at the earliest run_at known. */
export interface Alarm {
  timer: NodeJS.Timeout;
  at: number;
  /** Armed from the queue's answer (nextRunAt), not only for a job this worker put back. */
  fromQueue: boolean;
}

/** The timers and subscription a running worker holds. */
export interface Background {
  lifeline: NodeJS.Timeout;
  heartbeat: NodeJS.Timeout;
  unsubscribe: () => void;
}

/**
 * Which kinds a claim reads: `every` kind, or while every claim comes back full the `hot`
 * kinds that filled the last one, until `until` (see claimJobs).
 */
export type ClaimScope = { of: 'every' } | { of: 'hot'; kinds: string[]; set: Set<string>; until: number };
