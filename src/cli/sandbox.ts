import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import type { Config } from '../config/schema.js';
import { listChannels, normalizeSender } from '../core/channels.js';
import { openGatewayIn } from '../core/gateway-secrets.js';
import { getGateway } from '../core/gateways.js';
import { getMessageRowIn } from '../core/messages.js';
import { getPartner } from '../core/partners.js';
import { AppError, notFound } from '../lib/errors.js';
import {
  SANDBOX_SIGNATURE_HEADER,
  sandboxBody,
  sandboxTimestamp,
  signSandbox,
  type SandboxInboundEvent,
  type SandboxStatusEvent,
} from '../providers/sandbox/webhook.js';
import { channelTypeArg } from './args.js';
import { withCli, type Cli } from './context.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { kv, lines, type Result } from './output.js';

// msgctl sandbox: drive a sandbox gateway the way a provider drives a real one. The event is
// signed with the gateway's signing_secret (read here, never printed) and posted over HTTP to
// the msgd of this data directory, so it goes through the same intake, log and processing as
// any provider webhook.

const STATUSES = ['sent', 'delivered', 'read', 'failed', 'undelivered'] as const;
const TIMEOUT_MS = 10_000;

/** Where this data directory's msgd listens: its configured host and port (a wildcard host is reached on loopback). */
export function msgdUrl(config: Config, override?: string): string {
  if (override) {
    if (!URL.canParse(override) || !/^https?:$/.test(new URL(override).protocol))
      throw new UsageError(`--url expects an http(s) URL such as http://127.0.0.1:8080, got "${override}"`);
    return override.replace(/\/+$/, '');
  }
  const { host, port } = config.server;
  if (port === 0) throw new UsageError('server.port is 0 (chosen when msgd starts): give --url');
  const h = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

async function sandboxGateway(cli: Cli, ref: string) {
  const gw = await getGateway(cli.ctx, ref);
  if (gw.kind !== 'sandbox')
    throw new AppError('invalid_request', `gateway ${gw.name} is a ${gw.kind} gateway, not a sandbox`);
  const secret = (await openGatewayIn(cli.ctx, gw.id)).secrets.signing_secret;
  if (!secret) throw new AppError('invalid_request', `sandbox gateway ${gw.name} has no signing_secret`);
  return { gw, secret };
}

interface Posted {
  url: string;
  webhookId: string | null;
}

async function post(
  base: string,
  gatewayId: string,
  secret: string,
  event: SandboxInboundEvent | SandboxStatusEvent,
): Promise<Posted> {
  const url = `${base}/api/webhook.php?gateway=${encodeURIComponent(gatewayId)}`;
  const body = sandboxBody([event]);
  let res: Response;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [SANDBOX_SIGNATURE_HEADER]: signSandbox(secret, body) },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (e: any) {
    const why = e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(e);
    throw new AppError('unreachable', `cannot reach msgd at ${base} (${why}): is it running there? give --url`);
  }
  const text = await res.text();
  let answer: any;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = undefined;
  }
  if (res.status < 200 || res.status > 299) {
    const why = answer?.error?.message ?? text.slice(0, 200);
    throw new AppError('refused', `msgd at ${base} answered ${res.status}: ${why}`);
  }
  return { url, webhookId: typeof answer?.id === 'string' ? answer.id : res.headers.get('x-msgd-webhook-id') };
}

function posted(headline: string, p: Posted, event: object): Result {
  return {
    json: { webhook_id: p.webhookId, url: p.url, event },
    text: lines(
      headline,
      kv(
        [
          ['posted to', p.url],
          ['webhook', p.webhookId],
        ],
        '  ',
      ),
      `msgd processes it within a second: msgctl webhooks log shows the outcome.`,
    ),
  };
}

async function inbound(
  cli: Cli,
  ref: string,
  opts: { from: string; text: string; to?: string; channel?: string; url?: string },
): Promise<Result> {
  const type = opts.channel === undefined ? undefined : channelTypeArg(opts.channel);
  const base = msgdUrl(cli.config, opts.url);
  const { gw, secret } = await sandboxGateway(cli, ref);
  let served = (await listChannels(cli.ctx)).filter((c) => c.gateway_id === gw.id && (!type || c.type === type));
  if (opts.to !== undefined) {
    const to = opts.to;
    served = served.filter((c) => c.sender === to || (c.type !== 'email' && safeNormal(c.type, to) === c.sender));
  }
  if (served.length === 0) {
    throw new AppError(
      'invalid_request',
      `no active channel of gateway ${gw.name} matches${opts.to ? ` sender ${opts.to}` : ''}${type ? ` on ${type}` : ''}: assign one with msgctl channel assign`,
    );
  }
  if (served.length > 1) {
    const list = served.map((c) => `${c.type} ${c.sender}`).join(', ');
    throw new AppError('invalid_request', `gateway ${gw.name} serves ${list}: say which with --to and/or --channel`);
  }
  const ch = served[0];
  const event: SandboxInboundEvent = {
    id: `sbx_${randomBytes(12).toString('hex')}`,
    type: 'message',
    channel: ch.type,
    from: opts.from,
    to: ch.sender,
    text: opts.text,
    timestamp: sandboxTimestamp(cli.ctx.now()),
  };
  const p = await post(base, gw.id, secret, event);
  const partner = (await getPartner(cli.ctx, ch.partner_id)).slug;
  return posted(`Posted a signed inbound ${ch.type} message from ${opts.from} to ${ch.sender} (${partner}).`, p, event);
}

function safeNormal(type: Parameters<typeof normalizeSender>[0], s: string): string | null {
  try {
    return normalizeSender(type, s);
  } catch {
    return null;
  }
}

async function status(
  cli: Cli,
  ref: string,
  message: string,
  opts: { status: string; errorCode?: string; errorMessage?: string; url?: string },
): Promise<Result> {
  if (!(STATUSES as readonly string[]).includes(opts.status))
    throw new UsageError(`--status must be one of ${STATUSES.join(', ')}, got "${opts.status}"`);
  const base = msgdUrl(cli.config, opts.url);
  const { gw, secret } = await sandboxGateway(cli, ref);
  const m = await getMessageRowIn(cli.ctx.store, message);
  if (!m) throw notFound('message', message);
  if (m.direction !== 'outbound')
    throw new AppError('invalid_request', `message ${m.id} is inbound: it has no delivery status`);
  if (m.gateway_id !== gw.id)
    throw new AppError('invalid_request', `message ${m.id} was not sent through gateway ${gw.name}`);
  if (!m.provider_message_id)
    throw new AppError('invalid_request', `message ${m.id} is ${m.status}: the sandbox has not taken it yet`);
  const error =
    opts.errorCode !== undefined || opts.errorMessage !== undefined
      ? { code: opts.errorCode, message: opts.errorMessage }
      : undefined;
  const event: SandboxStatusEvent = {
    id: `sbx_${randomBytes(12).toString('hex')}`,
    message_id: m.provider_message_id,
    status: opts.status,
    timestamp: sandboxTimestamp(cli.ctx.now()),
    ...(error ? { error } : {}),
  };
  const p = await post(base, gw.id, secret, event);
  return posted(`Posted a signed "${opts.status}" report for ${m.id} (${m.provider_message_id}).`, p, event);
}

export function registerSandbox(program: Command) {
  const sandbox = program
    .command('sandbox')
    .description("drive a sandbox gateway like a provider: signed webhooks to this data directory's msgd");
  const urlOption = [
    '--url <base>',
    "msgd's base URL (default: http://<server.host>:<server.port> of this data directory's config)",
  ] as const;

  sandbox
    .command('inbound')
    .description('simulate a customer writing to a channel served by a sandbox gateway')
    .argument('<gateway>', 'sandbox gateway name or id')
    .requiredOption('--from <address>', "the customer's address (+E.164 number, email, page-scoped id)")
    .requiredOption('--text <text>', 'what the customer wrote')
    .option('--to <sender>', "the channel's sender address, when the gateway serves several channels")
    .option('--channel <type>', 'the channel type, when the gateway serves several')
    .option(...urlOption)
    .addHelpText(
      'after',
      examples(
        'msgctl sandbox inbound sandbox --channel sms --from +14155550123 --text "Hello back"',
        'msgctl sandbox inbound demo --to +15550000001 --from +14155550123 --text "STOP" --url http://127.0.0.1:9000',
      ),
    )
    .action(withCli(inbound));

  sandbox
    .command('status')
    .description('report a delivery status for a message sent through a sandbox gateway')
    .argument('<gateway>', 'sandbox gateway name or id')
    .argument('<message>', 'message id (msg_...)')
    .requiredOption('--status <status>', STATUSES.join(', '))
    .option('--error-code <code>', 'with failed or undelivered: the provider error code')
    .option('--error-message <text>', 'with failed or undelivered: the provider error text')
    .option(...urlOption)
    .addHelpText(
      'after',
      examples(
        'msgctl sandbox status sandbox msg_01jd... --status read',
        'msgctl sandbox status sandbox msg_01jd... --status failed --error-code 30003 --error-message "unreachable"',
      ),
    )
    .action(withCli(status));
}
