import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliStore, cliStore, dumpStore, oneErrorLine, runCli, type RunOptions } from '../helpers/cli.js';

// Every bad input fails with one "msgctl: ..." line on stderr, nothing on stdout (also with
// --json), and leaves every operator table exactly as it was.

let s: CliStore;

beforeAll(async () => {
  s = await cliStore();
  const steps: [string[], RunOptions?][] = [
    [['partner', 'create', 'acme', '--name', 'Acme Ltd']],
    [
      [
        'gateway',
        'add',
        'twilio',
        '--name',
        'twilio-main',
        '--set',
        'account_sid=AC123',
        '--secret-stdin',
        'auth_token',
      ],
      { stdin: 'tok\n' },
    ],
    [['channel', 'assign', 'acme', 'twilio-main', 'sms', '--from', '+15550001111']],
    [['price', 'set', 'sms', '0.0075']],
    [['balance', 'topup', 'acme', '100.00']],
  ];
  for (const [args, opts] of steps) {
    const r = await runCli(args, s.opts(opts));
    if (r.code !== 0) throw new Error(`setup ${args.join(' ')}: ${r.stderr}`);
  }
});
afterAll(() => s.drop());

interface Case {
  name: string;
  args: string[];
  error: RegExp;
  opts?: RunOptions;
  code?: number;
  /** Also run with --json (a representative subset: every kind of error, not every case). */
  json?: boolean;
}

const cases: Case[] = [
  {
    name: 'unknown partner',
    json: true,
    args: ['balance', 'topup', 'nope', '10.00'],
    error: /partner "nope" not found/,
  },
  {
    name: 'unknown partner for a token',
    args: ['token', 'issue', 'nope', '--name', 'x', '--scopes', 'messages:send'],
    error: /partner "nope" not found/,
  },
  {
    name: 'bad scope',
    json: true,
    args: ['token', 'issue', 'acme', '--name', 'x', '--scopes', 'messages:send,messages:delete'],
    error: /unknown scope "messages:delete".*allowed: messages:send/,
    code: 2,
  },
  {
    name: 'expiry in the past',
    args: ['token', 'issue', 'acme', '--name', 'x', '--scopes', '*', '--expires', '2020-01-01'],
    error: /expiry must be in the future/,
    code: 2,
  },
  {
    name: 'unparseable expiry',
    args: ['token', 'issue', 'acme', '--name', 'x', '--scopes', '*', '--expires', 'soon'],
    error: /invalid expiry "soon"/,
    code: 2,
  },
  {
    name: 'negative top-up',
    json: true,
    args: ['balance', 'topup', 'acme', '-5.00'],
    error: /top-up must be a positive amount/,
    code: 2,
  },
  { name: 'zero top-up', args: ['balance', 'topup', 'acme', '0'], error: /top-up must be a positive amount/, code: 2 },
  {
    name: 'malformed amount 1.2.3',
    json: true,
    args: ['balance', 'topup', 'acme', '1.2.3'],
    error: /invalid amount "1\.2\.3"/,
    code: 2,
  },
  { name: 'malformed amount 1e3', args: ['balance', 'topup', 'acme', '1e3'], error: /invalid amount "1e3"/, code: 2 },
  {
    name: 'too many decimals',
    args: ['balance', 'topup', 'acme', '1.1234567'],
    error: /invalid amount "1\.1234567": at most 6 decimal places/,
    code: 2,
  },
  {
    name: 'huge amount',
    args: ['balance', 'topup', 'acme', '99999999999999999999'],
    error: /invalid amount .*too large/,
    code: 2,
  },
  // Only a plain decimal is an amount: padding, a plus sign or leading zeros are refused,
  // never read as 5.00.
  ...[' 5', '5 ', '+5', '00005', '05.00'].map((amount) => ({
    name: `amount ${JSON.stringify(amount)}`,
    args: ['balance', 'topup', 'acme', amount],
    error: new RegExp(`invalid amount "${amount.replace('+', '\\+')}": expected a plain decimal number`),
    code: 2,
  })),
  ...[' 5', '5 ', '+5', '00005'].map((amount) => ({
    name: `price ${JSON.stringify(amount)}`,
    args: ['price', 'set', 'sms', amount],
    error: /invalid amount .*: expected a plain decimal number/,
    code: 2,
  })),
  {
    name: 'adjustment -05',
    args: ['balance', 'adjust', 'acme', '--note', 'x', '--', '-05'],
    error: /invalid amount "-05"/,
    code: 2,
  },
  {
    name: 'credit limit " 5"',
    args: ['partner', 'set-credit', 'acme', ' 5'],
    error: /invalid amount " 5"/,
    code: 2,
  },
  {
    name: 'a 100 kB amount is quoted cut, with its length',
    json: true,
    args: ['balance', 'topup', 'acme', '9'.repeat(100_000)],
    error: new RegExp(
      `^msgctl: invalid amount "${'9'.repeat(40)}…" \\(100000 characters\\): too large: at most 1000000000\\.00 either way$`,
    ),
    code: 2,
  },
  {
    name: 'a 100 kB non-number amount is quoted cut',
    args: ['price', 'set', 'sms', 'a'.repeat(100_000)],
    error: new RegExp(
      `^msgctl: invalid amount "${'a'.repeat(40)}…" \\(100000 characters\\): expected a plain decimal number such as 12\\.50$`,
    ),
    code: 2,
  },
  {
    name: 'malformed adjustment',
    args: ['balance', 'adjust', 'acme', '--note', 'x', '--', '-1,50'],
    error: /invalid amount "-1,50"/,
    code: 2,
  },
  {
    name: 'malformed credit on create',
    args: ['partner', 'create', 'beta', '--name', 'Beta', '--credit', '1.2.3'],
    error: /invalid amount "1\.2\.3"/,
    code: 2,
  },
  {
    name: 'negative credit limit',
    args: ['partner', 'set-credit', 'acme', '-1.00'],
    error: /credit limit must be zero or positive/,
    code: 2,
  },
  { name: 'duplicate partner', args: ['partner', 'create', 'acme', '--name', 'Again'], error: /already exists/ },
  {
    name: 'bad slug',
    args: ['partner', 'create', 'Not A Slug', '--name', 'X'],
    error: /invalid partner: slug: lowercase/,
    code: 2,
  },
  { name: 'malformed price', args: ['price', 'set', 'sms', 'abc'], error: /invalid amount "abc"/, code: 2 },
  {
    name: 'unknown channel type for a price',
    args: ['price', 'set', 'fax', '0.01'],
    error: /unknown channel type "fax"/,
    code: 2,
  },
  {
    name: 'unknown gateway kind',
    json: true,
    args: ['gateway', 'add', 'carrier_pigeon', '--name', 'coo'],
    error: /unknown gateway kind "carrier_pigeon": kind: one of whatsapp_cloud/,
    code: 2,
  },
  {
    name: 'missing required secret',
    json: true,
    args: ['gateway', 'add', 'twilio', '--name', 'tw2', '--set', 'account_sid=AC999'],
    error:
      /invalid secrets for a twilio gateway: auth_token: required secret for twilio is missing; give secrets with --secret-stdin/,
  },
  {
    name: 'secret env var not set',
    args: [
      'gateway',
      'add',
      'twilio',
      '--name',
      'tw2',
      '--set',
      'account_sid=AC999',
      '--secret-env',
      'auth_token=MSGCTL_TEST_UNSET',
    ],
    error: /environment variable MSGCTL_TEST_UNSET is not set/,
  },
  {
    name: 'empty secret on stdin',
    args: ['gateway', 'add', 'twilio', '--name', 'tw2', '--set', 'account_sid=AC999', '--secret-stdin', 'auth_token'],
    opts: { stdin: '\n' },
    error: /secret "auth_token" is empty/,
  },
  {
    name: 'a SendGrid verification key that is not a public key',
    json: true,
    args: [
      'gateway',
      'add',
      'sendgrid',
      '--name',
      'sg',
      '--secret-env',
      'api_key=SG_KEY',
      '--secret-stdin',
      'webhook_public_key',
    ],
    opts: { stdin: 'SG.this-is-the-api-key-pasted-by-mistake\n', env: { SG_KEY: 'SG.key' } },
    error:
      /^msgctl: invalid secrets for a sendgrid gateway: webhook_public_key: not a public key: paste the Verification Key from SendGrid/,
  },
  {
    name: 'invalid setting',
    args: ['gateway', 'add', 'twilio', '--name', 'tw2', '--set', 'account_sid=XX1', '--secret-stdin', 'auth_token'],
    opts: { stdin: 'x' },
    error: /^msgctl: invalid settings for a twilio gateway: account_sid: expected an account SID starting with AC$/,
  },
  {
    name: 'unknown setting',
    args: [
      'gateway',
      'add',
      'twilio',
      '--name',
      'tw2',
      '--set',
      'account_sid=AC1',
      '--set',
      'colour=blue',
      '--secret-stdin',
      'auth_token',
    ],
    opts: { stdin: 'x' },
    error: /colour: unknown setting for twilio/,
  },
  {
    name: 'a Messenger gateway sending tagged messages without a tag',
    args: [
      'gateway',
      'add',
      'meta_messenger',
      '--name',
      'fb',
      '--set',
      'page_id=123',
      '--set',
      'messaging_type=MESSAGE_TAG',
      '--secret-stdin',
      'page_access_token',
    ],
    opts: { stdin: 'x' },
    error:
      /^msgctl: invalid settings for a meta_messenger gateway: tag: messaging_type MESSAGE_TAG needs a tag, e\.g\. tag=HUMAN_AGENT/,
  },
  {
    name: 'a Messenger tag that is not a Meta message tag',
    args: [
      'gateway',
      'add',
      'meta_messenger',
      '--name',
      'fb',
      '--set',
      'page_id=123',
      '--set',
      'messaging_type=MESSAGE_TAG',
      '--set',
      'tag=human agent',
      '--secret-stdin',
      'page_access_token',
    ],
    opts: { stdin: 'x' },
    error: /tag: expected a Meta message tag such as HUMAN_AGENT/,
  },
  {
    name: 'non-numeric port',
    args: ['gateway', 'add', 'smtp', '--name', 'relay', '--set', 'host=mx.example.com', '--set', 'port=smtp'],
    error: /port: expected a number, got "smtp"/,
  },
  {
    name: 'duplicate gateway name',
    args: ['gateway', 'add', 'sandbox', '--name', 'twilio-main'],
    error: /a gateway named "twilio-main" already exists/,
  },
  {
    name: 'wrong-kind channel type',
    json: true,
    args: ['channel', 'assign', 'acme', 'twilio-main', 'whatsapp', '--from', '+15550002222'],
    error: /a twilio gateway cannot serve whatsapp; it serves sms/,
  },
  {
    name: 'unknown gateway',
    args: ['channel', 'assign', 'acme', 'nope', 'sms', '--from', '+15550002222'],
    error: /gateway "nope" not found/,
  },
  {
    name: 'unknown channel type',
    args: ['channel', 'assign', 'acme', 'twilio-main', 'fax'],
    error: /unknown channel type "fax"/,
    code: 2,
  },
  {
    name: 'bad sender',
    args: ['channel', 'assign', 'acme', 'twilio-main', 'sms', '--from', '555-1234'],
    error: /not a valid E\.164 number/,
  },
  {
    name: 'second active channel of a type',
    args: ['channel', 'assign', 'acme', 'twilio-main', 'sms', '--from', '+15550002222'],
    error: /already has an active sms channel/,
  },
  {
    name: 'removing a gateway in use',
    args: ['gateway', 'remove', 'twilio-main', '--yes'],
    error: /assigned to 1 active channel/,
  },
  { name: 'unknown token', args: ['token', 'revoke', 'tok_nope'], error: /token "tok_nope" not found/ },
  {
    name: 'adjustment without effect',
    args: ['balance', 'adjust', 'acme', '0', '--note', 'x'],
    error: /non-zero amount/,
    code: 2,
  },
  {
    name: 'a malformed amount for an unknown partner: the usage error comes first',
    args: ['balance', 'topup', 'nope', 'abc'],
    error: /invalid amount "abc"/,
    code: 2,
  },
  {
    name: 'unknown channel type when removing a price',
    args: ['price', 'unset', 'fax'],
    error: /unknown channel type "fax": one of whatsapp, messenger, instagram, sms, email/,
    code: 2,
  },
  {
    name: 'malformed low-balance threshold',
    args: ['partner', 'set-limits', 'acme', '--low-balance', 'lots'],
    error: /invalid amount "lots"/,
    code: 2,
  },
  // Usage errors found without reading data (missing or unknown options): exit 2.
  {
    name: 'missing required option',
    json: true,
    args: ['partner', 'create', 'beta'],
    error: /required option '--name <name>' not specified/,
    code: 2,
  },
  { name: 'unknown option', args: ['partner', 'list', '--colour'], error: /unknown option '--colour'/, code: 2 },
  {
    name: 'unknown command',
    json: true,
    args: ['partner', 'delete', 'acme'],
    error: /unknown command 'delete'/,
    code: 2,
  },
  {
    name: 'missing argument',
    args: ['balance', 'topup', 'acme'],
    error: /missing required argument 'amount'/,
    code: 2,
  },
  { name: 'bad --limit', args: ['ledger', 'list', 'acme', '--limit', '-3'], error: /--limit/, code: 2 },
  {
    name: '--set without =',
    args: ['gateway', 'add', 'sandbox', '--name', 'sb', '--set', 'delivery_delay_ms'],
    error: /--set expects key=value/,
    code: 2,
  },
  {
    name: '--disable with --enable',
    json: true,
    args: ['gateway', 'update', 'twilio-main', '--disable', '--enable'],
    error: /exclude each other/,
    code: 2,
  },
  {
    name: 'unassign without a target',
    args: ['channel', 'unassign', 'acme'],
    error: /give <partner> <type>, or --id/,
    code: 2,
  },
  {
    name: 'an adjustment with an empty note: core names the field, msgctl its flag',
    args: ['balance', 'adjust', 'acme', '5.00', '--note', ''],
    error: /^msgctl: an adjustment needs a note saying why: --note: required$/,
  },
  {
    name: 'an SMS channel without a sender address: named as its flag',
    args: ['channel', 'assign', 'acme', 'twilio-main', 'sms'],
    error: /^msgctl: the sender address is required for a sms channel: --from: required$/,
  },
  {
    name: 'a gateway setting both set and unset',
    args: [
      'gateway',
      'update',
      'twilio-main',
      '--set',
      'messaging_service_sid=MG1',
      '--unset',
      'messaging_service_sid',
    ],
    error: /^msgctl: both set and unset: messaging_service_sid: messaging_service_sid: set or unset it, not both$/,
  },
];

describe('bad input changes nothing', () => {
  for (const c of cases) {
    for (const json of c.json ? [false, true] : [false]) {
      it(`${c.name}${json ? ' (--json)' : ''}`, async () => {
        const before = await dumpStore(s);
        const r = await runCli(json ? [...c.args, '--json'] : c.args, s.opts(c.opts));
        expect(r.code, r.stderr).toBe(c.code ?? 1);
        expect(r.stdout).toBe('');
        expect(oneErrorLine(r.stderr)).toMatch(c.error);
        expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
        expect(await dumpStore(s)).toEqual(before);
      });
    }
  }
});

it('a stack trace is printed only with MSGD_DEBUG=1', async () => {
  const r = await runCli(['partner', 'show', 'nope'], s.opts({ env: { MSGD_DEBUG: '1' } }));
  expect(r.code).toBe(1);
  expect(r.stderr.split('\n')[0]).toBe('msgctl: partner "nope" not found');
  expect(r.stderr).toMatch(/\n\s+at /);
});
