import { sql } from '../db/sql.js';
import { stmt } from '../db/stmt.js';
import type { CoreCtx, GatewayKind } from '../core/context.js';
import { openGateway, openGatewayIn, type GatewayWithSecrets } from '../core/gateway-secrets.js';
import { settingsVersion, storeSettingsVersion } from '../core/settings-version.js';
import type { GatewayHint, WebhookHandler } from '../providers/webhooks.js';

// Gateways as dispatch and the webhook path need them (one book per runtime, rt.gateways):
// every gateway opened (secrets decrypted) once and kept until the settings version moves
// (src/core/settings-version.ts: read at most once per event-loop turn), so a change made by
// msgctl (another process) is seen by the next request or dispatch, and neither a verified
// webhook nor a sent message costs a decrypt or a JSON scan of settings.
//
// On SQLite the book reads the version (and the gateways) synchronously on the connection, on
// first use in a turn. On PostgreSQL it is read through the store by load(), which its users
// await before they read the book (dispatch: before each claim); between loads the book answers
// with what the last one read, and before the first one it refuses to answer. What a later
// statement read may name a gateway made after that load: getFor() looks for it again.

export class GatewayBook {
  private version = '';
  private reloads = 0;
  private byId = new Map<string, GatewayWithSecrets>();

  /** On the SQLite connection (read on use), or through the store (read by load()). */
  private readonly onConnection: boolean;

  constructor(private readonly ctx: CoreCtx) {
    this.onConnection = ctx.store.dialect === 'sqlite';
  }

  /**
   * Reads the gateways again if the settings version moved: through the store on PostgreSQL,
   * on the connection on SQLite (where every read of the book does this anyway).
   */
  load(): Promise<void> {
    if (this.onConnection) {
      this.fresh();
      return Promise.resolve();
    }
    // Callers of one moment share one read: they go on together (a burst of webhooks stays one
    // intake batch), and the gateways are not read twice.
    this.loading ??= this.read().finally(() => {
      this.loading = null;
    });
    return this.loading;
  }

  private loading: Promise<void> | null = null;

  /**
   * When the list of gateways the book holds was asked for (performance.now()), on PostgreSQL: a
   * row committed before then is in it.
   */
  private listedAt = Number.NEGATIVE_INFINITY;

  /** Reads the gateways if the settings version moved, or whatever it says when `always`. */
  private async read(always = false): Promise<void> {
    const version = await storeSettingsVersion(this.ctx.store);
    if (!always && version === this.version) return;
    const next = new Map<string, GatewayWithSecrets>();
    const listedAt = performance.now();
    const ids = await this.ctx.store.all<{ id: string }>(sql`SELECT id FROM gateways ORDER BY id`);
    for (const { id } of ids) next.set(id, await openGatewayIn(this.ctx, id));
    // Two reads under way at once (a load and a recheck): the one that listed later stays.
    if (listedAt < this.listedAt) return;
    this.byId = next;
    this.version = version;
    this.listedAt = listedAt;
    this.reloads++;
  }

  /**
   * The gateway `id` as get() gives it, for a row read from the store at `readAt`
   * (performance.now() once its read had answered: a message naming the gateway, say). On
   * PostgreSQL the book may have been read before that row's gateway was made (a load, then a
   * claim whose statements see what was committed since): a gateway the book does not hold is
   * then looked for again, so only one missing from the store as well is answered null. One
   * read again serves every row read before it.
   */
  async getFor(id: string, readAt: number): Promise<GatewayWithSecrets | null> {
    const known = this.get(id);
    if (known || this.onConnection || this.listedAt >= readAt) return known;
    await this.read(true);
    return this.get(id);
  }

  private fresh(): Map<string, GatewayWithSecrets> {
    if (!this.onConnection) {
      if (this.reloads === 0) throw new Error('the gateway book is read through the store: await load() first');
      return this.byId;
    }
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
