import type { z } from 'zod';
import type { ChannelType } from '../lib/channel-types.js';

// What core knows of a provider account: the interface of the gateway-kind registry it is
// given in its context (CoreCtx.gatewayKinds). The kinds themselves (their settings, secrets
// and checks) live with their providers, in src/providers/<kind>/kind.ts; core validates
// gateways and channels through this interface and never imports a provider.

export type GatewayKind =
  'whatsapp_cloud' | 'meta_messenger' | 'meta_instagram' | 'twilio' | 'sendgrid' | 'smtp' | 'sandbox';

export interface GatewayKindSpec {
  kind: GatewayKind;
  label: string;
  channels: readonly ChannelType[];
  /** The non-secret settings: a strict object whose output (defaults applied) is what is stored. */
  settings: z.ZodObject<any>;
  secrets: { required: readonly string[]; optional: readonly string[] };
  /** Checks of a secret's form where one is knowable (a key that must parse): the problem, or null. */
  secretChecks?: Record<string, (value: string) => string | null>;
  /**
   * A setting and a secret that work only together. `needs: 'secret'`: the setting makes the
   * secret required (Twilio's api_key_sid needs api_key_secret); `needs: 'setting'`: the secret
   * is used only with the setting (SMTP's password is sent only with a user).
   */
  pairs?: readonly { setting: string; secret: string; needs: 'secret' | 'setting' }[];
  /** Secrets msgd makes itself when a new gateway is given none (the sandbox's signing secret). */
  generatedSecrets?: Record<string, () => string>;
  /**
   * Whether a gateway of this kind, with these stored settings, is held to Meta's 24-hour
   * customer-service window (src/core/customer-window.ts); unset: never.
   */
  customerServiceWindow?(settings: Record<string, unknown>): boolean;
  /** The natural sender of a channel of this type when the operator gives none (a page's id). */
  defaultSender?(type: ChannelType, settings: Record<string, unknown>): string | undefined;
}

/** Every gateway kind msgd knows, as core reads them. */
export interface GatewayKindRegistry {
  /** In the order msgctl, the TUI and the docs list them. */
  readonly specs: readonly GatewayKindSpec[];
  has(kind: string): kind is GatewayKind;
  /** Throws on a kind the registry does not hold (a row the schema refuses could not name one). */
  get(kind: GatewayKind): GatewayKindSpec;
}
