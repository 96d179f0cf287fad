import { stmt } from '../db/stmt.js';
import type { CoreCtx, GatewayKind } from '../core/context.js';
import { openGateway, type GatewayWithSecrets } from '../core/gateway-secrets.js';
import type { GatewayHint, WebhookHandler } from '../providers/webhooks.js';

// Gateways as dispatch and the webhook path need them (one book per runtime, rt.gateways):
// every gateway opened (secrets decrypted) once and kept until the gateways table changes. One
// tiny aggregate query per event-loop turn tells whether it did, so a change made by msgctl
// (another process) is seen by the next request or dispatch, and neither a verified webhook nor
// a sent message costs a decrypt or a JSON scan of settings.

// Every change to a gateway reseals its secrets under a fresh random IV (src/core/secrets.ts),
// so the ids with the first bytes of their sealed secrets are a version of the whole table.
const STAMP = `SELECT COALESCE(group_concat(v, ','), '') AS v FROM (SELECT id || '/' || substr(secrets, 1, 24) AS v FROM gateways ORDER BY id)`;

export class GatewayBook {
  private stamp = '';
  private byId = new Map<string, GatewayWithSecrets>();

  constructor(private readonly ctx: CoreCtx) {}

  private checkedThisTurn = false;

  private fresh(): Map<string, GatewayWithSecrets> {
    // Once per event-loop turn: a turn takes a burst of webhooks, and any change committed
    // before the turn began is still seen by its first request.
    if (this.checkedThisTurn) return this.byId;
    this.checkedThisTurn = true;
    setImmediate(() => (this.checkedThisTurn = false));
    const stamp = stmt<[], { v: string }>(this.ctx.db.sqlite, STAMP).get()!.v;
    if (stamp !== this.stamp) {
      const ids = stmt<[], { id: string }>(this.ctx.db.sqlite, 'SELECT id FROM gateways ORDER BY id').all();
      const next = new Map<string, GatewayWithSecrets>();
      for (const { id } of ids) {
        next.set(id, openGateway(this.ctx, id));
      }
      this.byId = next;
      this.stamp = stamp;
    }
    return this.byId;
  }

  get(id: string): GatewayWithSecrets | null {
    return this.fresh().get(id) ?? null;
  }

  /** Gateways whose settings hold a value the payload names. */
  byHints(hints: GatewayHint[]): GatewayWithSecrets[] {
    if (hints.length === 0) return [];
    const out: GatewayWithSecrets[] = [];
    for (const gw of this.fresh().values()) {
      if (hints.some((h) => h.kind === gw.kind && String(gw.settings[h.setting] ?? '') === h.value)) out.push(gw);
    }
    return out;
  }

  ofKinds(kinds: readonly GatewayKind[]): GatewayWithSecrets[] {
    return [...this.fresh().values()].filter((g) => kinds.includes(g.kind));
  }

  /**
   * Whether a webhook verified with `signer`'s secret may touch `gatewayId`: the same gateway,
   * or one holding the same secret (one Meta app serving several numbers and pages).
   */
  trusts(handler: WebhookHandler, signer: GatewayWithSecrets | null, gatewayId: string | null): boolean {
    if (!signer || !gatewayId) return false;
    if (gatewayId === signer.id) return true;
    const secret = signer.secrets[handler.secretName];
    const other = this.get(gatewayId);
    return !!secret && !!other && other.secrets[handler.secretName] === secret;
  }
}
