import { invalid, type ErrorDetail } from '../lib/errors.js';
import { parsePairs, readStdin } from './args.js';
import { UsageError } from './errors.js';
import { processIO, type CliIO } from './io.js';

// Turning --set / --secret-* flags into the settings and secrets core validates. The shell
// only has strings: core's gateway-kind schemas read numbers and booleans from them, and name
// what is wrong, so --set values go through as given.

export function settingsFromFlags(sets: string[] | undefined): Record<string, unknown> {
  return Object.fromEntries(parsePairs(sets, '--set').map(([key, raw]) => [key, raw.trim()]));
}

export interface SecretFlags {
  secretStdin?: string;
  secretEnv?: string[];
}

/**
 * Secrets come only from stdin or from named environment variables, so they never
 * appear in shell history or in `ps`. Stdin is read only when --secret-stdin is given.
 */
export async function collectSecrets(
  flags: SecretFlags,
  io: Pick<CliIO, 'env' | 'stdin' | 'stderr' | 'isTTY'> = processIO(),
): Promise<Record<string, string>> {
  const env = io.env;
  const secrets: Record<string, string> = {};
  const take = (name: string, value: string, from: string) => {
    if (!name) throw new UsageError(`${from}: the secret name is missing`);
    if (name in secrets) throw new UsageError(`secret "${name}" is given more than once`);
    if (value.length === 0) throw invalid(`secret "${name}" is empty (${from})`);
    secrets[name] = value;
  };
  for (const [name, variable] of parsePairs(flags.secretEnv, '--secret-env')) {
    const value = env[variable];
    if (value === undefined) throw invalid(`environment variable ${variable} is not set (for secret "${name}")`);
    take(name, value, `--secret-env ${name}=${variable}`);
  }
  if (flags.secretStdin !== undefined) {
    if (io.isTTY) io.stderr.write(`Enter ${flags.secretStdin}, then Ctrl-D:\n`);
    take(flags.secretStdin.trim(), await readStdin(io.stdin), '--secret-stdin');
  }
  return secrets;
}

/** Appended to core's "required secret is missing" so the operator knows how to give it. */
export const SECRET_HINT: ErrorDetail = {
  message: 'give secrets with --secret-stdin <name> (value on stdin) or --secret-env <name>=<ENV_VAR>',
};
