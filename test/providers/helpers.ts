import { Agent } from 'undici';
import type { GatewayKind } from '../../src/core/context.js';
import type { KindSettings } from '../../src/providers/kinds.js';
import type { GatewayRuntime, MessageContent, OutboundMessage, SendContext } from '../../src/providers/types.js';
import type { ChannelType } from '../../src/core/context.js';

export function newDispatcher(): Agent {
  return new Agent({ keepAliveTimeout: 10_000, connections: 64 });
}

export function makeCtx(dispatcher: Agent, over: Partial<SendContext> = {}): SendContext {
  return { dispatcher, timeoutMs: 5_000, publicUrl: null, now: () => Date.now(), ...over };
}

let seq = 0;

/**
 * A gateway of `kind` with its settings as a row holds them: the kind's settings type, though a
 * test may leave out what a stored row can lack (a default added since it was written).
 */
export function makeGw<K extends GatewayKind>(
  kind: K,
  settings: Record<string, unknown>,
  secrets: Record<string, string>,
): GatewayRuntime<KindSettings[K]> {
  seq += 1;
  return { id: `gw_test${seq}`, kind, name: `${kind} ${seq}`, settings: settings as KindSettings[K], secrets };
}

export function makeMsg(channel: ChannelType, to: string, from: string, content: MessageContent): OutboundMessage {
  seq += 1;
  return { id: `msg_test${seq}`, channel, to, from, content };
}

export function text(t: string): MessageContent {
  return { kind: 'text', text: t };
}
