import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { ROOT } from '../helpers/cli.js';
import { makeCert } from '../helpers/tls.js';

// deploy/cluster/ is the example of docs/scale.md: two msgd on one PostgreSQL behind nginx, as
// systemd units on a host (msgd@.service, msgd.env, msgd.json, nginx.conf) and with Docker
// Compose (compose.yaml, compose-nginx.conf). Checked here as far as this machine allows:
// `systemd-analyze verify` for the unit and `nginx -t` for the proxy where they are installed
// (skipped with the reason otherwise), the Compose file against the Compose Specification's
// schema, and every file against the others and msgd's own config.

const dir = join(ROOT, 'deploy', 'cluster');
const read = (name: string) => readFileSync(join(dir, name), 'utf8');
const has = (cmd: string, args: string[]) => spawnSync(cmd, args).status === 0;

function unitLines(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const s = /^\[(\w+)\]$/.exec(line);
    if (s) {
      section = s[1];
      continue;
    }
    const i = line.indexOf('=');
    expect(i, `not key=value: ${line}`).toBeGreaterThan(0);
    const key = `${section}.${line.slice(0, i)}`;
    out.set(key, [...(out.get(key) ?? []), line.slice(i + 1)]);
  }
  return out;
}

function envFile(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of read('msgd.env').split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const m = /^([A-Z_]+)=(.*)$/.exec(line);
    expect(m, `not NAME=value: ${line}`).not.toBeNull();
    env[m![1]] = m![2];
  }
  return env;
}

/** The upstream servers of an nginx config and the upstream its location proxies to. */
function upstreamOf(conf: string): { name: string; servers: string[]; proxyPass: string } {
  const block = /upstream (\w+) \{([^}]*)\}/.exec(conf);
  expect(block, 'an upstream block').not.toBeNull();
  const servers = [...block![2].matchAll(/^\s*server (\S+)/gm)].map((m) => m[1]);
  return { name: block![1], servers, proxyPass: /proxy_pass (\S+);/.exec(conf)![1] };
}

describe('deploy/cluster: msgd@.service, msgd.env and msgd.json', () => {
  const unit = unitLines(read('msgd@.service'));
  const env = envFile();

  it('runs msgd itself per port, from the environment file every instance and msgctl share', () => {
    expect(unit.get('Service.ExecStart')).toEqual(['/opt/msgd/node_modules/.bin/msgd --no-demo']);
    expect(unit.get('Service.Environment')).toEqual(expect.arrayContaining(['MSGD_PORT=%i', 'MSGD_DEMO=false']));
    // Required: an instance without the database and the key must fail, not start on SQLite.
    expect(unit.get('Service.EnvironmentFile')).toEqual(['/etc/msgd/msgd.env']);
    expect(unit.get('Service.StateDirectory')).toBeUndefined();
    expect(unit.get('Service.Restart')).toEqual(['on-failure']);
    const config = loadConfig({ env: {} });
    const bound = Math.max(10_000, config.dispatch.timeoutMs + 2_000) + 10_000;
    expect(Number(unit.get('Service.TimeoutStopSec')![0]) * 1000).toBeGreaterThan(bound);
  });

  it('gives each instance the same PostgreSQL, master key file and config, which msgd reads as meant', () => {
    expect(Object.keys(env).sort()).toEqual(['MSGD_CONFIG', 'MSGD_DATABASE_URL', 'MSGD_MASTER_KEY_FILE', 'PGPASSWORD']);
    // The example's config file stands where the environment file says it is.
    const config = loadConfig({ env: { ...env, MSGD_CONFIG: join(dir, 'msgd.json') } });
    expect(config.database.url).toBe(env.MSGD_DATABASE_URL);
    expect(new URL(env.MSGD_DATABASE_URL).password).toBe('');
    expect(config.masterKeyFile).toBe('/etc/msgd/master.key');
    expect(config.server.publicUrl).toBe('https://gw.example.com');
    expect(config.server.trustProxy).toBe(true);
    expect(config.server.host).toBe('127.0.0.1');
  });

  it.skipIf(!has('systemd-analyze', ['--version']))('passes systemd-analyze verify as msgd@8081', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'msgd-unit-'));
    try {
      // verify wants ExecStart's binary to exist: the repository's bin/msgd stands in for /opt's,
      // and the environment file the unit requires.
      const envPath = join(tmp, 'msgd.env');
      writeFileSync(envPath, read('msgd.env'));
      const text = read('msgd@.service')
        .replace('/opt/msgd/node_modules/.bin/msgd', join(ROOT, 'bin', 'msgd'))
        .replace('EnvironmentFile=/etc/msgd/msgd.env', `EnvironmentFile=${envPath}`);
      writeFileSync(join(tmp, 'msgd@.service'), text);
      const r = spawnSync('systemd-analyze', ['verify', join(tmp, 'msgd@8081.service')], { encoding: 'utf8' });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe('deploy/cluster/nginx.conf', () => {
  const conf = read('nginx.conf');

  it('balances the instances the units start, and never sends a request twice', () => {
    const up = upstreamOf(conf);
    expect(up.servers).toEqual(['127.0.0.1:8081', '127.0.0.1:8082']);
    expect(up.proxyPass).toBe(`http://${up.name}`);
    expect(conf).toMatch(/client_max_body_size 1m;/);
    expect(loadConfig({ env: {} }).server.bodyLimitBytes).toBe(1024 * 1024);
    const next = /proxy_next_upstream ([^;]+);/.exec(conf)![1].split(/\s+/);
    expect(next).not.toContain('non_idempotent');
    expect(conf).toMatch(/listen 80;[\s\S]*return 308 https:\/\/\$host\$request_uri;/);
  });

  const nginx = has('nginx', ['-v']);
  if (!nginx)
    it.skip('nginx -t: nginx is not installed here (apt-get install nginx-light to check the config)', () => {});
  it.skipIf(!nginx)('passes nginx -t', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'msgd-nginx-'));
    const tls = makeCert();
    try {
      // The site as a distribution's nginx.conf includes it, with a certificate that exists.
      const site = conf
        .replace('/etc/letsencrypt/live/gw.example.com/fullchain.pem', tls.cert)
        .replace('/etc/letsencrypt/live/gw.example.com/privkey.pem', tls.key);
      writeFileSync(join(tmp, 'msgd.conf'), site);
      writeFileSync(
        join(tmp, 'nginx.conf'),
        [
          `pid ${join(tmp, 'nginx.pid')};`,
          `error_log ${join(tmp, 'error.log')};`,
          'events {}',
          `http { access_log off; include ${join(tmp, 'msgd.conf')}; }`,
          '',
        ].join('\n'),
      );
      const r = spawnSync('nginx', ['-t', '-p', tmp, '-c', join(tmp, 'nginx.conf')], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toContain('test is successful');
    } finally {
      tls.cleanup();
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe('deploy/cluster/compose.yaml', () => {
  const compose = parse(read('compose.yaml'), { merge: true });

  it('is valid by the Compose Specification', () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    const { $schema, ...schema } = JSON.parse(
      readFileSync(join(ROOT, 'test', 'deploy', 'fixtures', 'compose-spec.json'), 'utf8'),
    );
    expect($schema).toMatch(/json-schema\.org/);
    const validate = ajv.compile(schema);
    expect(validate(compose), JSON.stringify(validate.errors, null, 2)).toBe(true);
  });

  it('runs two msgd on the PostgreSQL service with the same key, config and database', () => {
    const s = compose.services;
    const instances = ['msgd-1', 'msgd-2'].map((n) => s[n]);
    for (const m of instances) {
      expect(m.environment.MSGD_DATABASE_URL).toBe('postgres://msgd@postgres:5432/msgd');
      expect(m.environment.MSGD_CONFIG).toBe('/etc/msgd/msgd.json');
      expect(m.volumes).toContain('./msgd.compose.json:/etc/msgd/msgd.json:ro');
      expect(m.secrets).toEqual(['msgd_master_key', 'pg_password']);
      const [sh, c, script, name] = m.entrypoint;
      expect([sh, c, name]).toEqual(['/bin/sh', '-c', 'msgd']);
      expect(script).toContain('MSGD_MASTER_KEY="$$(cat /run/secrets/msgd_master_key)"');
      expect(script).toContain('PGPASSWORD="$$(cat /run/secrets/pg_password)"');
      expect(script).toMatch(/ && exec \/opt\/msgd\/node_modules\/\.bin\/msgd "\$\$@"$/);
      expect(m.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
      expect(m.stop_grace_period).toBe('60s');
    }
    const pgUrl = new URL(instances[0].environment.MSGD_DATABASE_URL);
    expect(s.postgres.environment.POSTGRES_USER).toBe(decodeURIComponent(pgUrl.username));
    expect(s.postgres.environment.POSTGRES_DB).toBe(pgUrl.pathname.slice(1));
    expect(s.postgres.environment.POSTGRES_PASSWORD_FILE).toBe('/run/secrets/pg_password');
    expect(s.postgres.volumes).toEqual(['pg-data:/var/lib/postgresql/data']);
    expect(s.postgres.healthcheck.test).toContain('pg_isready');
    expect(compose.secrets).toEqual({
      msgd_master_key: { file: './master.key' },
      pg_password: { file: './pg-password' },
    });
  });

  it("puts nginx in front of exactly the msgd services, on the image's port", () => {
    const n = compose.services.nginx;
    expect(n.volumes).toEqual(['./compose-nginx.conf:/etc/nginx/conf.d/default.conf:ro']);
    expect(n.ports).toEqual(['127.0.0.1:8080:80']);
    expect(Object.keys(n.depends_on).sort()).toEqual(['msgd-1', 'msgd-2']);
    const up = upstreamOf(read('compose-nginx.conf'));
    expect(up.proxyPass).toBe(`http://${up.name}`);
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    const port = /MSGD_PORT=(\d+)/.exec(dockerfile)![1];
    expect(up.servers).toEqual([`msgd-1:${port}`, `msgd-2:${port}`]);
  });
});
