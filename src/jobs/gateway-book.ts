import { stmt } from '../db/stmt.js';
import type { CoreCtx, GatewayKind } from '../core/context.js';
import { openGateway, type GatewayWithSecrets } from '../core/gateway-secrets.js';
import { settingsVersion } from '../core/settings-version.js';
import type { GatewayHint, WebhookHandler } from '../providers/webhooks.js';

// Gateways as dispatch and the webhook path need them (one book per runtime, rt.gateways):
// every gateway opened (secrets decrypted) once and kept until the settings version moves
// (src/core/settings-version.ts: read at most once per event-loop turn), so a change made by
// msgctl (another process) is seen by the next request or dispatch, and neither a verified
// webhook nor a sent message costs a decrypt or a JSON scan of settings.

export class GatewayBook {
  private version = '';
  private reloads = 0;
  private byId = new Map<string, GatewayWithSecrets>();

  constructor(private readonly ctx: CoreCtx) {}

  private fresh(): Map<string, GatewayWithSecrets> {
    const version = settingsVersion(this.ctx.db.sqlite);
    if (version !== this.version) {
      const ids = stmt<[], { id: string }>(this.ctx.db.sqlite, 'SELECT id FROM gateways ORDER BY id').all();
      const next = new Map<string, GatewayWithSecrets>();
      for (const { id } of ids) {
        next.set(id, openGateway(this.ctx, id));
      }
      this.byId = next;
      this.version = version;
      this.reloads++;
    }
    return this.byId;
  }

  /** Moves whenever the gateways were read again (something in the settings changed). */
  generation(): number {
    this.fresh();
    return this.reloads;
  }

  all(): GatewayWithSecrets[] {
    return [...this.fresh().values()];
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
