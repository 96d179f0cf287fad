import type { Config } from '../config/schema.js';
import type { CoreCtx } from '../core/context.js';
import type { GatewayKind } from '../core/context.js';

/**
 * What the console needs from msgctl: the opened data directory, who acts, and the msgctl
 * commands it runs itself (the same functions, so the same checks, audit and messages;
 * the queue's operator operations it takes from src/jobs/, as msgctl does). The
 * CLI hands these in, so the console never imports the CLI.
 */
export interface TuiDeps {
  ctx: CoreCtx;
  config: Config;
  /** The audit log's actor: tui:<os user>. */
  actor: string;
  version: string;
  dataDir: string;
  /** The one-line message msgctl prints for an error. */
  describeError(e: unknown): string;
  /** msgctl token issue --expires: an ISO date or 30d / 12h / 90m / 2w from now. */
  parseExpiry(input: string, now: number): number;
  /** Where the provider must send this gateway's webhooks (msgctl gateway show). */
  webhookUrl(g: { id: string; kind: GatewayKind }): string | null;
}
