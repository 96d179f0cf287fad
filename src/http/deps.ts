import type { Leader } from '../db/leader.js';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { Counters } from '../core/counters.js';
import type { AcceptDeps } from '../core/send.js';
import type { TokenAuthenticator } from '../core/tokens.js';
import type { StorageHealth } from '../db/storage.js';
import type { CircuitBreakers } from '../jobs/circuit-breaker.js';
import type { GatewayBook } from '../jobs/gateway-book.js';
import type { JobQueue } from '../queue/queue.js';
import type { Worker } from '../queue/worker.js';
import type { WebhookIntake } from '../webhooks-in/intake.js';

// What the partner APIs, the provider webhook paths, health and metrics use of the running
// msgd: src/server.ts hands them the runtime, which has all of it, and nothing here imports
// the runtime (it would know the surfaces it is wired into).

export interface HttpDeps {
  version: string;
  config: Config;
  logger: Logger;
  ctx: CoreCtx;
  auth: TokenAuthenticator;
  /** The accept's parts (src/core/send.ts): sends are group-committed by its batcher on ctx.store. */
  acceptDeps: AcceptDeps;
  /** Provider webhooks in: verified, stored and queued for processing in the store's group commit. */
  webhookIntake: WebhookIntake;
  queue: JobQueue;
  /** Gateways with their secrets opened, for the provider webhook paths. */
  gateways: GatewayBook;
  counters: Counters;
  /** Whether msgd can keep what it accepts: /readyz and the error answer read it. */
  storage: StorageHealth;
  /** Where msgd listens, once it does. */
  readonly selfUrl: string | null;
}

/** What metrics read: the same handles, the job kinds each worker runs, the gateways' circuits. */
export interface MetricsDeps extends Pick<HttpDeps, 'version' | 'config' | 'ctx' | 'counters' | 'storage'> {
  worker: Worker;
  webhooksOut: { worker: Worker };
  breakers: CircuitBreakers;
  /** The gauges read from the store are exported by the leader only. */
  leader: Pick<Leader, 'isLeader' | 'onChange'>;
}
