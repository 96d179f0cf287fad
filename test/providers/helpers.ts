import { Agent } from 'undici';
import type { GatewayKind } from '../../src/core/context.js';
import type { GatewayRuntime, MessageContent, OutboundMessage, SendContext } from '../../src/providers/types.js';
import type { ChannelType } from '../../src/core/context.js';

export function newDispatcher(): Agent {
  return new Agent({ keepAliveTimeout: 10_000, connections: 64 });
}

export function makeCtx(dispatcher: Agent, over: Partial<SendContext> = {}): SendContext {
  return { dispatcher, timeoutMs: 5_000, publicUrl: null, now: () => Date.now(), ...over };
}

let seq = 0;

export function makeGw(
  kind: GatewayKind,
  settings: Record<string, any>,
  secrets: Record<string, string>,
): GatewayRuntime {
  seq += 1;
  return { id: `gw_test${seq}`, kind, name: `${kind} ${seq}`, settings, secrets };
}

export function makeMsg(channel: ChannelType, to: string, from: string, content: MessageContent): OutboundMessage {
  seq += 1;
  return { id: `msg_test${seq}`, channel, to, from, content };
}

export function text(t: string): MessageContent {
  return { kind: 'text', text: t };
}
