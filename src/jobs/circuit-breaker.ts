import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Circuit, CircuitState } from '../core/circuits.js';

// A circuit breaker per gateway, in msgd's memory: each msgd on a database learns on its own
// (docs/scale.md). Closed: calls go through, and failures are counted. It opens after consecutiveFailures failed calls in a row,
// or when the share of failed calls over windowMs reaches failureRate (once minCalls were
// made): no call goes to the gateway for openMs. Then it is half-open: up to halfOpenProbes
// calls go through as probes; as many successes close it, one failure opens it again for twice
// as long (up to maxOpenMs). What is a failure is the caller's to say (src/jobs/failover.ts): a
// gateway that answers, even with a refusal about the recipient, is healthy.
//
// Every transition is logged at info and handed to `publish`, synchronously: the breaker never
// waits on the store (it is consulted inside the dispatch claim). msgd writes what it is handed
// to the gateway_circuits table for msgctl and the console, through the store, in order, after
// any transaction open at the time (src/runtime.ts).

export type BreakerConfig = Config['dispatch']['circuitBreaker'];

interface GatewayCircuit {
  state: CircuitState;
  failures: number;
  /** Call outcomes in the window: [at, ok] pairs, oldest first. */
  window: Array<[number, boolean]>;
  retryAt: number | null;
  openMs: number;
  /** Half-open: probes handed out and successes seen. */
  probes: number;
  successes: number;
  opened: number;
  reason: string | null;
  changedAt: number;
}

export interface Admission {
  /** The call may go to the gateway now. */
  allowed: boolean;
  /** When not: how long until the gateway may take a call again (at least a short wait). */
  waitMs: number;
  state: CircuitState;
}

/** How long a message waits for a half-open gateway whose probes are all out. */
const PROBE_WAIT_MS = 1000;

export class CircuitBreakers {
  private readonly circuits = new Map<string, GatewayCircuit>();

  constructor(
    private readonly config: BreakerConfig,
    private readonly now: () => number,
    private readonly logger?: Logger,
    private readonly publish?: (c: Circuit) => void,
    private readonly names: (gatewayId: string) => string = (id) => id,
  ) {}

  private get(id: string): GatewayCircuit {
    let c = this.circuits.get(id);
    if (!c) {
      c = {
        state: 'closed',
        failures: 0,
        window: [],
        retryAt: null,
        openMs: this.config.openMs,
        probes: 0,
        successes: 0,
        opened: 0,
        reason: null,
        changedAt: this.now(),
      };
      this.circuits.set(id, c);
    }
    return c;
  }

  /** The state without taking anything: an open circuit whose back-off is over reads half-open. */
  state(id: string): CircuitState {
    const c = this.circuits.get(id);
    if (!c) return 'closed';
    if (c.state === 'open' && c.retryAt !== null && this.now() >= c.retryAt) return 'half_open';
    return c.state;
  }

  /** Whether a call may go to the gateway now, or something else must take it (a fallback, the queue). */
  wouldAllow(id: string): boolean {
    const c = this.circuits.get(id);
    if (!c) return true;
    const s = this.state(id);
    if (s === 'closed') return true;
    if (s === 'open') return false;
    return c.state === 'open' || c.probes < this.config.halfOpenProbes;
  }

  /**
   * Take a call on the gateway: closed always admits; open admits nothing until its back-off is
   * over, then turns half-open and admits up to halfOpenProbes probes. Every admitted call must
   * be followed by record() (or release() if it never went out).
   */
  admit(id: string): Admission {
    const c = this.get(id);
    const now = this.now();
    if (c.state === 'open') {
      if (c.retryAt !== null && now < c.retryAt) return { allowed: false, waitMs: c.retryAt - now, state: 'open' };
      this.move(id, c, 'half_open', null);
      c.probes = 0;
      c.successes = 0;
    }
    if (c.state === 'half_open') {
      if (c.probes >= this.config.halfOpenProbes) return { allowed: false, waitMs: PROBE_WAIT_MS, state: 'half_open' };
      c.probes++;
      return { allowed: true, waitMs: 0, state: 'half_open' };
    }
    return { allowed: true, waitMs: 0, state: 'closed' };
  }

  /** An admitted call that never reached the gateway (msgd gave it up first): its probe is handed back. */
  release(id: string): void {
    const c = this.circuits.get(id);
    if (c?.state === 'half_open' && c.probes > 0) c.probes--;
  }

  /** The outcome of a call on the gateway: ok means the gateway answered as a working provider does. */
  record(id: string, ok: boolean, why?: string): void {
    const c = this.get(id);
    const now = this.now();
    if (c.state === 'half_open') {
      if (!ok) {
        c.openMs = Math.min(c.openMs * 2, this.config.maxOpenMs);
        return this.open(id, c, `a probe failed${why ? ` (${why})` : ''}`);
      }
      c.successes++;
      if (c.successes >= this.config.halfOpenProbes) {
        c.openMs = this.config.openMs;
        c.failures = 0;
        c.window = [];
        this.move(id, c, 'closed', null);
      }
      return;
    }
    if (c.state === 'open') return; // a call admitted before it opened: already counted against it
    c.window.push([now, ok]);
    const since = now - this.config.windowMs;
    while (c.window.length > 0 && c.window[0][0] < since) c.window.shift();
    if (ok) {
      if (c.failures > 0) {
        c.failures = 0;
        this.publishState(id, c);
      }
      return;
    }
    c.failures++;
    if (c.failures >= this.config.consecutiveFailures)
      return this.open(id, c, `${c.failures} failed calls in a row${why ? ` (last: ${why})` : ''}`);
    if (this.config.failureRate > 0 && c.window.length >= this.config.minCalls) {
      const failed = c.window.filter(([, good]) => !good).length;
      if (failed / c.window.length >= this.config.failureRate)
        return this.open(
          id,
          c,
          `${failed} of ${c.window.length} calls failed in ${Math.round(this.config.windowMs / 1000)}s${why ? ` (last: ${why})` : ''}`,
        );
    }
    // A first failure, so the consoles see a gateway starting to fail; later ones are not written.
    if (c.failures === 1) this.publishState(id, c);
  }

  private open(id: string, c: GatewayCircuit, reason: string) {
    c.retryAt = this.now() + c.openMs;
    c.opened++;
    c.window = [];
    this.move(id, c, 'open', reason);
  }

  private move(id: string, c: GatewayCircuit, to: CircuitState, reason: string | null) {
    const from = c.state;
    c.state = to;
    c.changedAt = this.now();
    if (to === 'open') c.reason = reason;
    if (to !== 'open') c.retryAt = null;
    if (to === 'closed') c.reason = null;
    this.logger?.info(
      {
        gatewayId: id,
        gateway: this.names(id),
        circuit: to,
        from,
        ...(to === 'open' ? { reason, openForMs: c.openMs } : {}),
      },
      to === 'open'
        ? `gateway ${this.names(id)}: circuit open for ${Math.round(c.openMs / 1000)}s: ${reason}`
        : to === 'half_open'
          ? `gateway ${this.names(id)}: circuit half-open, up to ${this.config.halfOpenProbes} probe calls`
          : `gateway ${this.names(id)}: circuit closed, the gateway takes calls again`,
    );
    this.publishState(id, c);
  }

  private publishState(id: string, c: GatewayCircuit) {
    this.publish?.({
      gateway_id: id,
      state: c.state,
      failures: c.failures,
      retry_at: c.retryAt,
      reason: c.reason,
      opened: c.opened,
      changed_at: c.changedAt,
    });
  }

  /** Every gateway's state and times opened, for /metrics. */
  snapshot(): Array<{ gatewayId: string; state: CircuitState; opened: number }> {
    return [...this.circuits.keys()].map((id) => ({
      gatewayId: id,
      state: this.state(id),
      opened: this.circuits.get(id)!.opened,
    }));
  }
}
