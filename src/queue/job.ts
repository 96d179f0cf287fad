// The job as the queue hands it out, and the small types its SQL and its callers share.

/** held: kept out of every claim until an operator releases it (see hold()). */
export type JobState = 'available' | 'running' | 'retry' | 'dead' | 'held';

export interface Job<P = unknown> {
  id: number;
  kind: string;
  payload: P;
  state: JobState;
  priority: number;
  runAt: number;
  /** Claims so far, this one included while the job runs. */
  attempts: number;
  maxAttempts: number;
  lockedUntil: number | null;
  lockedBy: string | null;
  reclaims: number;
  uniqueKey: string | null;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
}

/** Proof of holding a claim: a completion carrying one only lands while that claim stands. */
export interface Lease {
  workerId: string;
  attempts: number;
}

/** Which dead jobs an operator command targets. */
export type DeadTarget = number | 'all' | { kind: string };
