import type { Command, Option } from 'commander';
import { CHANNEL_TYPES } from '../core/context.js';
import { gatewayKinds } from '../providers/kinds.js';
import { UsageError } from './errors.js';
import { examples } from './help.js';
import { withGlobals } from './context.js';
import type { Result } from './output.js';

// Shell completion generated from the commander program itself, so a command or option added
// anywhere is completed without touching this file. Each script finds the command path typed so
// far (skipping options and their values) and offers that command's subcommands, options and
// the fixed values of its arguments (channel types, gateway kinds).

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
type Shell = (typeof SHELLS)[number];

interface Word {
  word: string;
  description: string;
}

interface Node {
  /** "msgctl partner create" */
  path: string;
  words: Word[];
}

/** Values an argument can take that are known without reading data. */
const ARGUMENT_VALUES: Record<string, readonly string[]> = {
  type: CHANNEL_TYPES,
  channel: CHANNEL_TYPES,
  kind: gatewayKinds.specs.map((k) => k.kind),
  shell: SHELLS,
};

/** Global flags whose value is a path: the shells complete file names for them. */
const FILE_FLAGS = ['--data-dir', '--config', '--master-key-file'];

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim();

function optionWords(options: readonly Option[]): Word[] {
  const out: Word[] = [];
  for (const o of options) {
    if (o.hidden) continue;
    for (const flag of [o.long, o.short]) if (flag) out.push({ word: flag, description: oneLine(o.description) });
  }
  return out;
}

function walk(cmd: Command, prefix: string, globals: Word[], out: Node[]): void {
  const path = prefix ? `${prefix} ${cmd.name()}` : cmd.name();
  const words: Word[] = [];
  for (const sub of cmd.commands) words.push({ word: sub.name(), description: oneLine(sub.description()) });
  for (const arg of cmd.registeredArguments) {
    for (const v of ARGUMENT_VALUES[arg.name()] ?? []) words.push({ word: v, description: arg.name() });
  }
  words.push(...optionWords(cmd.options), ...globals, { word: '--help', description: 'display help' });
  out.push({ path, words });
  for (const sub of cmd.commands) walk(sub, path, globals, out);
}

/** Every command path of the program with what may follow it, and the options that take a value. */
export function completionTree(program: Command): { nodes: Node[]; valued: string[] } {
  const nodes: Node[] = [];
  walk(program, '', [], nodes);
  // Program options are recognised after subcommands too: offer them at every level.
  const globals = optionWords(program.options.filter((o) => o.long !== '--version'));
  for (const n of nodes.slice(1)) n.words.push(...globals.filter((g) => !n.words.some((w) => w.word === g.word)));
  const valued = new Set<string>();
  const visit = (c: Command) => {
    for (const o of c.options) if (o.required || o.optional) for (const f of [o.long, o.short]) if (f) valued.add(f);
    c.commands.forEach(visit);
  };
  visit(program);
  return { nodes, valued: [...valued].sort() };
}

const sq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

function bash(tree: ReturnType<typeof completionTree>): string {
  const paths = tree.nodes.map((n) => n.path);
  return [
    '# msgctl completion for bash: eval "$(msgctl completion bash)" (or save it in bash_completion.d)',
    '_msgctl() {',
    '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" path="msgctl" i w skip=0',
    '  case "$prev" in',
    '    --data-dir|--config|--master-key-file) COMPREPLY=( $(compgen -f -- "$cur") ); return ;;',
    `    ${tree.valued.filter((v) => !FILE_FLAGS.includes(v)).join('|')}) COMPREPLY=(); return ;;`,
    '  esac',
    '  for ((i=1; i<COMP_CWORD; i++)); do',
    '    w="${COMP_WORDS[i]}"',
    '    if ((skip)); then skip=0; continue; fi',
    '    case "$w" in',
    `      ${tree.valued.join('|')}) skip=1; continue ;;`,
    '      -*) continue ;;',
    '    esac',
    '    case "$path $w" in',
    `      ${paths.map((p) => JSON.stringify(p)).join('|')}) path="$path $w" ;;`,
    '    esac',
    '  done',
    '  local words=""',
    '  case "$path" in',
    ...tree.nodes.map((n) => `    ${JSON.stringify(n.path)}) words=${sq(n.words.map((w) => w.word).join(' '))} ;;`),
    '  esac',
    '  COMPREPLY=( $(compgen -W "$words" -- "$cur") )',
    '}',
    'complete -o default -F _msgctl msgctl',
    '',
  ].join('\n');
}

function zsh(tree: ReturnType<typeof completionTree>): string {
  const paths = tree.nodes.map((n) => n.path);
  const entry = (w: Word) => sq(`${w.word.replace(/:/g, '\\:')}:${w.description}`);
  return [
    '#compdef msgctl',
    '# msgctl completion for zsh: msgctl completion zsh > "${fpath[1]}/_msgctl" (or eval it after compinit)',
    '_msgctl() {',
    '  local path_="msgctl" w i skip=0',
    '  local prev="${words[CURRENT-1]}"',
    '  case "$prev" in',
    '    --data-dir|--config|--master-key-file) _files; return ;;',
    `    ${tree.valued.filter((v) => !FILE_FLAGS.includes(v)).join('|')}) return ;;`,
    '  esac',
    '  for ((i=2; i<CURRENT; i++)); do',
    '    w="${words[i]}"',
    '    if ((skip)); then skip=0; continue; fi',
    '    case "$w" in',
    `      ${tree.valued.join('|')}) skip=1; continue ;;`,
    '      -*) continue ;;',
    '    esac',
    '    case "$path_ $w" in',
    `      ${paths.map((p) => JSON.stringify(p)).join('|')}) path_="$path_ $w" ;;`,
    '    esac',
    '  done',
    '  local -a candidates',
    '  case "$path_" in',
    ...tree.nodes.map((n) => `    ${JSON.stringify(n.path)}) candidates=(${n.words.map(entry).join(' ')}) ;;`),
    '  esac',
    "  _describe -t msgctl 'msgctl' candidates",
    '}',
    'if [[ "$funcstack[1]" = "_msgctl" ]]; then _msgctl "$@"; else compdef _msgctl msgctl; fi',
    '',
  ].join('\n');
}

function fish(tree: ReturnType<typeof completionTree>): string {
  const paths = tree.nodes.map((n) => n.path);
  const lines = [
    '# msgctl completion for fish: msgctl completion fish > ~/.config/fish/completions/msgctl.fish',
    'function __msgctl_path',
    '    set -l tokens (commandline -opc)',
    '    set -l path msgctl',
    '    set -l skip 0',
    '    for w in $tokens[2..-1]',
    '        if test $skip = 1',
    '            set skip 0',
    '            continue',
    '        end',
    '        switch $w',
    `            case ${tree.valued.join(' ')}`,
    '                set skip 1',
    '            case "-*"',
    '            case "*"',
    `                if contains -- "$path $w" ${paths.map((p) => sq(p)).join(' ')}`,
    '                    set path "$path $w"',
    '                end',
    '        end',
    '    end',
    '    echo $path',
    'end',
    'complete -c msgctl -f',
  ];
  for (const n of tree.nodes) {
    const cond = sq(`test (__msgctl_path) = ${sq(n.path)}`);
    for (const w of n.words) {
      const d = `-d ${sq(w.description)}`;
      if (w.word.startsWith('--')) lines.push(`complete -c msgctl -n ${cond} -l ${w.word.slice(2)} ${d}`);
      else if (w.word.startsWith('-')) lines.push(`complete -c msgctl -n ${cond} -s ${w.word.slice(1)} ${d}`);
      else lines.push(`complete -c msgctl -n ${cond} -a ${sq(w.word)} ${d}`);
    }
  }
  lines.push(
    'complete -c msgctl -l data-dir -r -F',
    'complete -c msgctl -l config -r -F',
    'complete -c msgctl -l master-key-file -r -F',
    '',
  );
  return lines.join('\n');
}

export function completionScript(program: Command, shell: string): string {
  if (!(SHELLS as readonly string[]).includes(shell))
    throw new UsageError(`unknown shell "${shell}": one of ${SHELLS.join(', ')}`);
  const tree = completionTree(program);
  return { bash, zsh, fish }[shell as Shell](tree);
}

export function registerCompletion(program: Command) {
  program
    .command('completion')
    .description('print a shell completion script (bash, zsh or fish)')
    .argument('<shell>', SHELLS.join(', '))
    .addHelpText(
      'after',
      examples(
        'eval "$(msgctl completion bash)"          # in ~/.bashrc',
        'msgctl completion zsh > "${fpath[1]}/_msgctl"',
        'msgctl completion fish > ~/.config/fish/completions/msgctl.fish',
      ),
    )
    .action(
      withGlobals((_globals, shell: string): Result => {
        const script = completionScript(program, shell);
        return { json: { shell, script }, text: script };
      }),
    );
}
