import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { runCli } from '../helpers/cli.js';

// Help is documentation: every command the operator guide names exists, and each one's --help
// carries examples. Checked in-process; test/cli/binary.test.ts runs the real binary.

function helpOf(cmd: Command): string {
  let out = '';
  cmd.configureOutput({ writeOut: (s) => (out += s), writeErr: (s) => (out += s) });
  cmd.outputHelp();
  return out;
}

function leaves(cmd: Command, prefix: string[] = []): [string, Command][] {
  if (cmd.commands.length === 0) return [[prefix.join(' '), cmd]];
  return cmd.commands.flatMap((c) => leaves(c, [...prefix, c.name()]));
}

const EXPECTED = [
  'init',
  'migrate',
  'partner create',
  'partner list',
  'partner show',
  'partner suspend',
  'partner activate',
  'partner set-credit',
  'partner set-limits',
  'token issue',
  'token list',
  'token revoke',
  'gateway add',
  'gateway list',
  'gateway show',
  'gateway update',
  'gateway remove',
  'channel assign',
  'channel unassign',
  'channel list',
  'price set',
  'price unset',
  'price list',
  'balance topup',
  'balance adjust',
  'balance show',
  'ledger list',
  'audit list',
  'doctor',
  'instances',
];

describe('msgctl help', () => {
  const program = buildProgram();
  const all = new Map(leaves(program));

  it('has every command the operator guide names', () => {
    expect([...all.keys()]).toEqual(expect.arrayContaining(EXPECTED));
  });

  it('lists every command group in msgctl --help, with the first session', () => {
    const help = helpOf(program);
    for (const group of new Set(EXPECTED.map((c) => c.split(' ')[0])))
      expect(help).toMatch(new RegExp(`^  ${group}\\b`, 'm'));
    expect(help).toContain('msgctl balance topup acme 100.00 --note "invoice 42"');
  });

  for (const name of EXPECTED) {
    it(`msgctl ${name} --help has a description, examples and the global options`, () => {
      const help = helpOf(all.get(name)!);
      expect(help).toMatch(new RegExp(`^Usage: msgctl ${name}`, 'm'));
      expect(help).toMatch(/\nExamples:\n {2}\$ .*msgctl /);
      const globals = help.slice(help.indexOf('Global Options:'));
      expect(globals).toContain('--json');
      expect(globals).toContain('--data-dir <dir>');
    });
  }

  it('--help exits 0 on stdout; a bare group shows its help and exits 2', async () => {
    const h = await runCli(['token', 'issue', '--help']);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain('store');
    const g = await runCli(['token']);
    expect(g.code).toBe(2);
    expect(g.stderr).toMatch(/Usage: msgctl token/);
    const v = await runCli(['--version']);
    expect(v.code).toBe(0);
    expect(v.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });
});

describe('exit codes', () => {
  it('msgctl --help states the one rule: 2 for what is wrong before any data is read, 1 for rules of the data', async () => {
    const h = await runCli(['--help']);
    expect(h.code).toBe(0);
    expect(h.stdout).toMatch(/Exit codes:\n {2}0 {2}ok\n {2}1 {2}refused by a rule checked against the data/);
    expect(h.stdout).toMatch(/ {2}2 {2}usage error, found before any data is read/);
  });
});
