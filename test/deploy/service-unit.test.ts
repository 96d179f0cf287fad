import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { ROOT } from '../helpers/cli.js';

// deploy/msgd.service is what an operator copies to /etc/systemd/system: its promises are
// checked here against msgd's own (the package's bin, the shutdown bound, the demo's banner).

function unit(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let section = '';
  for (const raw of readFileSync(join(ROOT, 'deploy', 'msgd.service'), 'utf8').split('\n')) {
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

describe('deploy/msgd.service', () => {
  const u = unit();
  const one = (k: string) => u.get(k)?.[0];

  it('runs the installed msgd itself, as its own user, with the demo off', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(Object.keys(pkg.bin)).toContain('msgd');
    expect(one('Service.ExecStart')).toMatch(/\/node_modules\/\.bin\/msgd --no-demo$/);
    expect(one('Service.ExecStart')).not.toMatch(/npm/);
    expect(one('Service.User')).toBe('msgd');
    expect(u.get('Service.Environment')).toContain('MSGD_DEMO=false');
    expect(pkg.files).toEqual(expect.arrayContaining(['bin/', 'dist/', 'migrations/', 'deploy/']));
  });

  it('restarts on failure and waits longer than msgd takes to stop', () => {
    expect(one('Service.Restart')).toBe('on-failure');
    const config = loadConfig({ env: {} });
    // Provider calls get dispatch.timeoutMs + 2 s (at least 10 s), then deliveries up to 10 s.
    const bound = Math.max(10_000, config.dispatch.timeoutMs + 2_000) + 10_000;
    expect(Number(one('Service.TimeoutStopSec')) * 1000).toBeGreaterThan(bound);
  });

  it('is locked down with only the data directory writable', () => {
    expect(one('Service.NoNewPrivileges')).toBe('true');
    expect(one('Service.ProtectSystem')).toBe('strict');
    const dataDir = u
      .get('Service.Environment')!
      .find((e) => e.startsWith('MSGD_DATA_DIR='))!
      .split('=')[1];
    expect(one('Service.ReadWritePaths')!.split(/\s+/)).toContain(dataDir);
    expect(`/var/lib/${one('Service.StateDirectory')}`).toBe(dataDir);
    expect(one('Service.UMask')).toBe('0077');
  });
});

const hasSystemdAnalyze = spawnSync('systemd-analyze', ['--version']).status === 0;

describe('deploy/msgd.service as systemd reads it', () => {
  it.skipIf(!hasSystemdAnalyze)('passes systemd-analyze verify without a word', () => {
    // verify wants ExecStart's binary to exist: the repository's bin/msgd stands in for /opt's.
    const dir = mkdtempSync(join(tmpdir(), 'msgd-unit-'));
    try {
      const text = readFileSync(join(ROOT, 'deploy', 'msgd.service'), 'utf8').replace(
        '/opt/msgd/node_modules/.bin/msgd',
        join(ROOT, 'bin', 'msgd'),
      );
      writeFileSync(join(dir, 'msgd.service'), text);
      const r = spawnSync('systemd-analyze', ['verify', join(dir, 'msgd.service')], { encoding: 'utf8' });
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
      const security = execFileSync('systemd-analyze', ['security', '--offline=true', join(dir, 'msgd.service')], {
        encoding: 'utf8',
      });
      const exposure = Number(/Overall exposure level for msgd\.service: ([\d.]+)/.exec(security)![1]);
      expect(exposure).toBeLessThanOrEqual(3.5);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('docs/deploy.md', () => {
  const doc = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8');
  const u = unit();

  it("writes the environment file the unit reads, with the unit's own config file and data directory", () => {
    expect(u.get('Service.EnvironmentFile')).toEqual(['-/etc/msgd/msgd.env']);
    const written =
      /printf '%s\\n' (.*) \\\n\s*\| sudo install -o root -g msgd -m 0640 \/dev\/stdin \/etc\/msgd\/msgd\.env/.exec(
        doc,
      );
    expect(written, 'the msgd.env line in docs/deploy.md').not.toBeNull();
    const vars = written![1].split(/\s+/).sort();
    const unitVars = u.get('Service.Environment')!.filter((e) => /^MSGD_(CONFIG|DATA_DIR)=/.test(e));
    expect(vars).toEqual(unitVars.sort());
    // msgctl reads the same file: every msgctl line of the guide goes through the function.
    expect(doc).toContain(`sh -c 'set -a && . /etc/msgd/msgd.env && exec /opt/msgd/node_modules/.bin/msgctl "$@"'`);
    expect(doc).not.toMatch(/MSGD_DATA_DIR=\/var\/lib\/msgd \/opt/);
  });

  it("lets both proxies take msgd's whole body limit, and redirects HTTP to HTTPS", () => {
    const config = loadConfig({ env: {} });
    expect(config.server.bodyLimitBytes).toBe(1024 * 1024);
    expect(doc).toMatch(/max_size 1MiB/);
    expect(doc).not.toMatch(/max_size 1MB/);
    expect(doc).toMatch(/client_max_body_size 1m;/);
    expect(doc).toMatch(/listen 80;[\s\S]*return 30[18] https:\/\/\$host\$request_uri;/);
  });
});
