import { readFileSync } from 'node:fs';
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
