import { GATEWAY_KINDS } from '../core/gateway-kinds.js';
import type { GatewayKind } from '../core/context.js';
import { invalid, type ErrorDetail } from '../lib/errors.js';
import { parsePairs, readStdin } from './args.js';
import { UsageError } from './errors.js';

// Turning --set / --secret-* flags into the settings and secrets core validates. The
// shell only has strings; the kind's schema says which settings are numbers or booleans.

/** The base type a kind's setting expects, under any default/optional wrappers. */
function settingType(kind: GatewayKind, key: string): string | undefined {
  const field = GATEWAY_KINDS[kind].settings.shape[key] as { def?: any } | undefined;
  let def = field?.def;
  while (def?.innerType) def = def.innerType.def;
  return def?.type;
}

const TRUE = ['true', 'yes', 'on', '1'];
const FALSE = ['false', 'no', 'off', '0'];

export function coerceSettings(kind: GatewayKind, sets: string[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const details: ErrorDetail[] = [];
  for (const [key, raw] of parsePairs(sets, '--set')) {
    const value = raw.trim();
    switch (settingType(kind, key)) {
      case 'number':
        if (/^-?\d+(\.\d+)?$/.test(value)) out[key] = Number(value);
        else details.push({ field: key, message: `expected a number, got "${raw}"` });
        break;
      case 'boolean':
        // Never Boolean(string): "false" is a non-empty string and would read as true.
        if (TRUE.includes(value.toLowerCase())) out[key] = true;
        else if (FALSE.includes(value.toLowerCase())) out[key] = false;
        else details.push({ field: key, message: `expected true or false, got "${raw}"` });
        break;
      default:
        // Strings, enums and unknown keys go through as given; core names what is wrong.
        out[key] = value;
    }
  }
  if (details.length) throw invalid(`invalid settings for a ${kind} gateway`, details);
  return out;
}

export interface SecretFlags {
  secretStdin?: string;
  secretEnv?: string[];
}

/**
 * Secrets come only from stdin or from named environment variables, so they never
 * appear in shell history or in `ps`. Stdin is read only when --secret-stdin is given.
 */
export async function collectSecrets(flags: SecretFlags, env: NodeJS.ProcessEnv = process.env): Promise<Record<string, string>> {
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
    if (process.stdin.isTTY) process.stderr.write(`Enter ${flags.secretStdin}, then Ctrl-D:\n`);
    take(flags.secretStdin.trim(), await readStdin(), '--secret-stdin');
  }
  return secrets;
}

/** Appended to core's "required secret is missing" so the operator knows how to give it. */
export const SECRET_HINT: ErrorDetail = {
  message: 'give secrets with --secret-stdin <name> (value on stdin) or --secret-env <name>=<ENV_VAR>',
};
