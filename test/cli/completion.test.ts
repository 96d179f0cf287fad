import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';
import { completionTree } from '../../src/cli/completion.js';
import { runCli } from '../helpers/cli.js';

// Completion scripts come from the commander program, so they know every command and option
// there is. The bash script is run in a real bash, as the shell's completion would call it.

async function script(shell: string): Promise<string> {
  const r = await runCli(['completion', shell]);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout;
}

/** What bash would offer after typing `line` (the last word is the one being completed). */
function bashComplete(source: string, line: string): string[] {
  const words = line.split(' ');
  const program = [
    source,
    `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')})`,
    `COMP_CWORD=${words.length - 1}`,
    '_msgctl',
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join('\n');
  return execFileSync('bash', ['--norc', '--noprofile', '-c', program], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}

describe('msgctl completion bash', () => {
  it('completes commands, subcommands, options and argument values at any depth', async () => {
    const s = await script('bash');
    expect(bashComplete(s, 'msgctl ')).toEqual(expect.arrayContaining(['partner', 'gateway', 'completion', 'doctor']));
    expect(bashComplete(s, 'msgctl ga')).toEqual(['gateway']);
    expect(bashComplete(s, 'msgctl gateway r')).toEqual(['remove']);
    expect(bashComplete(s, 'msgctl gateway remove --')).toEqual(
      expect.arrayContaining(['--yes', '--help', '--json', '--data-dir']),
    );
    expect(bashComplete(s, 'msgctl --data-dir /tmp/x price set ')).toEqual(
      expect.arrayContaining(['whatsapp', 'messenger', 'instagram', 'sms', 'email']),
    );
    expect(bashComplete(s, 'msgctl gateway add tw')).toEqual(['twilio']);
    expect(bashComplete(s, 'msgctl token issue acme --name prod --sc')).toEqual(['--scopes']);
    expect(bashComplete(s, 'msgctl completion ')).toEqual(expect.arrayContaining(['bash', 'zsh', 'fish']));
    // After an option that takes a value, nothing is made up.
    expect(bashComplete(s, 'msgctl balance topup acme 10 --note ')).toEqual([]);
  });

  it('knows every command of the program, so a new command is completed without a change here', async () => {
    const s = await script('bash');
    const tree = completionTree(buildProgram());
    for (const n of tree.nodes) {
      const parts = n.path.split(' ');
      if (parts.length < 2) continue;
      const parent = parts.slice(0, -1).join(' ');
      expect(bashComplete(s, `${parent} ${parts[parts.length - 1]}`), n.path).toContain(parts[parts.length - 1]);
    }
  });
});

describe('msgctl completion zsh and fish', () => {
  it('zsh: a #compdef function offering each command path its subcommands with descriptions', async () => {
    const s = await script('zsh');
    expect(s.startsWith('#compdef msgctl\n')).toBe(true);
    expect(s).toContain(`"msgctl gateway") candidates=(`);
    expect(s).toMatch(/'remove:remove a gateway that no active channel uses'/);
    expect(s).toMatch(/"msgctl jobs delete"\) candidates=\(.*'--yes:do it without asking/);
    expect(s).toContain('compdef _msgctl msgctl');
  });

  it('fish: complete lines conditioned on the command path', async () => {
    const s = await script('fish');
    expect(s).toContain('function __msgctl_path');
    expect(s).toContain(
      "complete -c msgctl -n 'test (__msgctl_path) = '\\''msgctl gateway'\\''' -a 'remove' -d 'remove a gateway that no active channel uses'",
    );
    expect(s).toContain("complete -c msgctl -n 'test (__msgctl_path) = '\\''msgctl jobs delete'\\''' -l yes");
  });

  it('an unknown shell is a usage error', async () => {
    const r = await runCli(['completion', 'powershell']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('msgctl: unknown shell "powershell": one of bash, zsh, fish\n');
  });
});
