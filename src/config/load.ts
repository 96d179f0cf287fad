import { readFileSync } from 'node:fs';
import { redactUrl } from '../lib/redact-url.js';
import { resolve } from 'node:path';
import { z } from 'zod';
import { configSchema, type Config } from './schema.js';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

export interface LoadOptions {
  /** Path given with --config; MSGD_CONFIG is used when absent. */
  configPath?: string;
  /** --data-dir; beats MSGD_DATA_DIR and the file. */
  dataDir?: string;
  /** --master-key-file; beats MSGD_MASTER_KEY_FILE and the file. */
  masterKeyFile?: string;
  /** --database-url; beats MSGD_DATABASE_URL and the file. */
  databaseUrl?: string;
  env?: NodeJS.ProcessEnv;
  /** Extra overrides applied last (tests). */
  overrides?: Record<string, unknown>;
}

type Setter = (raw: Record<string, any>, value: string) => void;

function setPath(raw: Record<string, any>, path: string[], value: unknown) {
  let node = raw;
  for (const key of path.slice(0, -1)) {
    if (typeof node[key] !== 'object' || node[key] === null) node[key] = {};
    node = node[key];
  }
  node[path[path.length - 1]] = value;
}

function asInt(name: string, v: string): number {
  if (!/^-?\d+$/.test(v.trim())) throw new ConfigError(`${name}: expected an integer, got "${v}"`);
  return Number(v);
}
function asBool(name: string, v: string): boolean {
  const s = v.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(s)) return true;
  if (['0', 'false', 'no', 'off'].includes(s)) return false;
  throw new ConfigError(`${name}: expected true or false, got "${v}"`);
}

// MSGD_* variables and the config key each one sets.
const ENV: Record<string, Setter> = {
  MSGD_DATA_DIR: (r, v) => setPath(r, ['dataDir'], v),
  MSGD_MASTER_KEY_FILE: (r, v) => setPath(r, ['masterKeyFile'], v === '' ? null : v),
  MSGD_DATABASE_URL: (r, v) => setPath(r, ['database', 'url'], v === '' ? null : v),
  MSGD_HOST: (r, v) => setPath(r, ['server', 'host'], v),
  MSGD_PORT: (r, v) => setPath(r, ['server', 'port'], asInt('MSGD_PORT', v)),
  MSGD_PUBLIC_URL: (r, v) => setPath(r, ['server', 'publicUrl'], v === '' ? null : v),
  MSGD_TRUST_PROXY: (r, v) => setPath(r, ['server', 'trustProxy'], asBool('MSGD_TRUST_PROXY', v)),
  MSGD_LOG_LEVEL: (r, v) => setPath(r, ['log', 'level'], v),
  MSGD_LOG_PRETTY: (r, v) => setPath(r, ['log', 'pretty'], asBool('MSGD_LOG_PRETTY', v)),
  MSGD_ACCESS_LOG: (r, v) => setPath(r, ['log', 'accessLog'], asBool('MSGD_ACCESS_LOG', v)),
  MSGD_METRICS_PORT: (r, v) => setPath(r, ['metrics', 'port'], v === '' ? null : asInt('MSGD_METRICS_PORT', v)),
  MSGD_METRICS_TOKEN: (r, v) => setPath(r, ['metrics', 'token'], v === '' ? null : v),
  MSGD_DEMO: (r, v) => setPath(r, ['demo', 'enabled'], asBool('MSGD_DEMO', v)),
  MSGD_WEBHOOKS_ALLOW_PRIVATE: (r, v) =>
    setPath(r, ['webhooksOut', 'allowPrivateTargets'], asBool('MSGD_WEBHOOKS_ALLOW_PRIVATE', v)),
  MSGD_WEBHOOKS_CA_FILE: (r, v) => setPath(r, ['webhooksOut', 'caFile'], v === '' ? null : v),
  MSGD_BACKUP_DIR: (r, v) => setPath(r, ['backup', 'dir'], v === '' ? null : v),
  MSGD_BACKUP_BEFORE_MIGRATE: (r, v) =>
    setPath(r, ['backup', 'beforeMigrate'], asBool('MSGD_BACKUP_BEFORE_MIGRATE', v)),
};

function describeIssue(issue: z.core.$ZodIssue): string {
  const key = issue.path.join('.') || '(root)';
  if (issue.code === 'unrecognized_keys') {
    const prefix = issue.path.length ? `${issue.path.join('.')}.` : '';
    return `unknown key ${issue.keys.map((k) => `"${prefix}${k}"`).join(', ')}`;
  }
  return `${key}: ${issue.message}`;
}

/**
 * The one wording of a configuration that does not validate, for msgd and msgctl alike: one
 * line (log shippers and msgctl's stderr take one line per error), the file, then every key.
 */
export function formatConfigIssues(configPath: string | undefined, issues: string[]): string {
  return `invalid configuration${configPath ? ` (${configPath})` : ''}: ${issues.join('; ')}`;
}

/** The absolute path of the config file loadConfig reads with these options, or null for none. */
export function configFileFor(opts: Pick<LoadOptions, 'configPath' | 'env'> = {}): string | null {
  const path = opts.configPath ?? (opts.env ?? process.env).MSGD_CONFIG;
  return path ? resolve(path) : null;
}

export function loadConfig(opts: LoadOptions = {}): Config {
  const env = opts.env ?? process.env;
  const configPath = opts.configPath ?? env.MSGD_CONFIG;
  let raw: Record<string, any> = {};
  if (configPath) {
    let text: string;
    try {
      text = readFileSync(resolve(configPath), 'utf8');
    } catch (e: any) {
      throw new ConfigError(`cannot read config file ${configPath}: ${e.code ?? e.message}`);
    }
    try {
      raw = JSON.parse(text);
    } catch (e: any) {
      throw new ConfigError(`config file ${configPath} is not valid JSON: ${e.message}`);
    }
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      throw new ConfigError(`config file ${configPath} must hold a JSON object`);
    }
    delete raw.$schema;
    delete raw.$comment;
  }
  for (const [name, set] of Object.entries(ENV)) {
    const v = env[name];
    if (v !== undefined) set(raw, v);
  }
  if (opts.dataDir !== undefined) raw.dataDir = opts.dataDir;
  if (opts.masterKeyFile !== undefined) raw.masterKeyFile = opts.masterKeyFile;
  if (opts.databaseUrl !== undefined)
    setPath(raw, ['database', 'url'], opts.databaseUrl === '' ? null : opts.databaseUrl);
  if (opts.overrides) {
    for (const [k, v] of Object.entries(opts.overrides)) setPath(raw, k.split('.'), v);
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(formatConfigIssues(configPath, parsed.error.issues.map(describeIssue)));
  }
  return parsed.data;
}

/** The configuration as msgd and msgctl may print or log it: the database URL's password masked. */
export function shownConfig(config: Config): Config {
  if (config.database.url === null) return config;
  return { ...config, database: { ...config.database, url: redactUrl(config.database.url) } };
}
