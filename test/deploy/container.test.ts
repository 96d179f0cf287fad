import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

// The container image and the Compose example, checked with what runs without a container
// engine: dockerfilelint's rules, the Compose Specification's JSON schema, and the promise
// that the image is built and installed with the very commands .ci/pack-smoke runs in CI.
//
// fixtures/compose-spec.json is schema/compose-spec.json of github.com/compose-spec/compose-spec
// at 170098ba07d9f53c383a41bfd4c5166b0a4529a6 (Apache-2.0), unchanged.

const read = (...p: string[]) => readFileSync(join(ROOT, ...p), 'utf8');
const dockerfile = read('Dockerfile');
const packSmoke = read('.ci', 'pack-smoke');

/** The Dockerfile's instructions (continuation lines joined, comments left out), by stage. */
function stages(): { from: string; instructions: [string, string][] }[] {
  const out: { from: string; instructions: [string, string][] }[] = [];
  for (const line of dockerfile
    .split('\n')
    .filter((l) => !l.trim().startsWith('#'))
    .join('\n')
    .replace(/\\\n\s*/g, ' ')
    .split('\n')) {
    const m = /^([A-Z]+)\s+(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === 'FROM') out.push({ from: m[2], instructions: [] });
    out[out.length - 1].instructions.push([m[1], m[2]]);
  }
  return out;
}
const all = (stage: { instructions: [string, string][] }, op: string) =>
  stage.instructions.filter(([o]) => o === op).map(([, a]) => a);

describe('Dockerfile', () => {
  it('passes dockerfilelint', () => {
    const lint = createRequire(import.meta.url)('dockerfilelint') as {
      run(configPath: string, content: string): { title: string; line: number; description: string }[];
    };
    expect(lint.run(ROOT, dockerfile).map((i) => `line ${i.line}: ${i.title}: ${i.description}`)).toEqual([]);
  });

  it('builds with dev dependencies, runs with production ones as a non-root user', () => {
    const s = stages();
    expect(s.length).toBeGreaterThanOrEqual(2);
    const [build, run] = [s[0], s[s.length - 1]];
    expect(build.from).toMatch(/ AS build$/);
    expect(all(build, 'RUN')).toContain('npm ci --no-audit --no-fund');
    expect(all(build, 'RUN').some((r) => r.includes('--omit=dev'))).toBe(true);
    // The runtime stage takes the installed package from the build, and runs no npm at all.
    expect(all(run, 'COPY')).toEqual(['--from=build /opt/msgd /opt/msgd']);
    expect(all(run, 'RUN').join(' ')).not.toMatch(/\bnpm\b/);
    expect(all(run, 'USER')).toEqual(['msgd']);
    expect(all(run, 'RUN').join(' ')).toMatch(/useradd --system --uid 10001 /);
  });

  it('keeps its data in a volume, listens on every interface, leaves the demo off', () => {
    const run = stages().at(-1)!;
    const env = all(run, 'ENV').join(' ');
    const dataDir = /MSGD_DATA_DIR=(\S+)/.exec(env)![1];
    expect(all(run, 'VOLUME')).toEqual([dataDir]);
    expect(env).toMatch(/MSGD_HOST=0\.0\.0\.0\b/);
    expect(env).toMatch(/MSGD_DEMO=false\b/);
    expect(all(run, 'CMD')).toContain('["--no-demo"]');
  });

  it('runs msgd itself as PID 1 and checks /readyz with node (no curl in the slim image)', () => {
    const run = stages().at(-1)!;
    expect(JSON.parse(all(run, 'ENTRYPOINT')[0])).toEqual(['/opt/msgd/node_modules/.bin/msgd']);
    expect(all(run, 'STOPSIGNAL')).toEqual(['SIGTERM']);
    const hc = all(run, 'HEALTHCHECK')[0];
    const cmd = JSON.parse(hc.slice(hc.indexOf('CMD ') + 4));
    expect(cmd.slice(0, 2)).toEqual(['node', '-e']);
    expect(cmd[2]).toContain('/readyz');
    const commands = stages().flatMap((st) => st.instructions.map(([, a]) => a));
    expect(commands.join('\n')).not.toMatch(/\b(curl|wget)\b/);
  });

  it('is built and installed with the commands CI runs in .ci/pack-smoke', () => {
    const runs = stages()
      .flatMap((s) => all(s, 'RUN'))
      .join(' && ');
    // npm pack, then the tarball installed into an empty directory without dev dependencies.
    expect(runs).toMatch(/npm pack --pack-destination \S+/);
    expect(packSmoke).toMatch(/npm pack --silent --pack-destination/);
    expect(runs).toContain('npm init -y >/dev/null');
    expect(packSmoke).toContain('npm init -y >/dev/null');
    expect(runs).toContain('npm install --no-audit --no-fund --omit=dev ');
    expect(packSmoke).toContain('npm install --no-audit --no-fund --prefer-offline --omit=dev ');
    // The health check's own request, word for word.
    const hc = all(stages().at(-1)!, 'HEALTHCHECK')[0];
    const probe = JSON.parse(hc.slice(hc.indexOf('CMD ') + 4))[2] as string;
    expect(packSmoke).toContain(`MSGD_PORT=$port node -e "${probe}"`);
    expect(packSmoke).toMatch(/kill -TERM "\$pid"/);
  });

  it('.dockerignore keeps the host build, data and secrets out of the context', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .filter((l) => l && !l.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['.git', 'node_modules', 'dist', 'data', 'master.key']));
  });
});

describe('deploy/compose.yaml', () => {
  const compose = parse(read('deploy', 'compose.yaml'), { merge: true });

  it('is valid by the Compose Specification', () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    // The schema names draft-07 as "https://json-schema.org/draft-07/schema" (no "#"), an id
    // Ajv does not know by that spelling; Ajv's default draft is draft-07 itself.
    const { $schema, ...schema } = JSON.parse(read('test', 'deploy', 'fixtures', 'compose-spec.json'));
    expect($schema).toBe('https://json-schema.org/draft-07/schema');
    const validate = ajv.compile(schema);
    expect(validate(compose), JSON.stringify(validate.errors, null, 2)).toBe(true);
  });

  it('keeps the data on a volume and the master key in a secret file, never in the environment', () => {
    const msgd = compose.services.msgd;
    const dataDir = /MSGD_DATA_DIR=(\S+)/.exec(dockerfile)![1];
    expect(msgd.volumes).toContain(`msgd-data:${dataDir}`);
    expect(compose.volumes).toHaveProperty('msgd-data');
    expect(msgd.secrets).toEqual(['msgd_master_key']);
    expect(compose.secrets.msgd_master_key).toEqual({ file: './master.key' });
    for (const svc of Object.values<any>(compose.services)) {
      expect(Object.keys(svc.environment ?? {})).not.toContain('MSGD_MASTER_KEY');
      // The key is read from the secret in the container, then msgd (or msgctl) is exec'd.
      expect(svc.entrypoint[2]).toMatch(/^MSGD_MASTER_KEY="\$\$\(cat \/run\/secrets\/msgd_master_key\)" && .* exec /);
    }
    expect(msgd.entrypoint[2]).toContain('exec /opt/msgd/node_modules/.bin/msgd "$$@"');
  });

  it('gives msgd the time to stop the systemd unit gives it, and publishes it on loopback only', () => {
    const msgd = compose.services.msgd;
    const unitStop = Number(/^TimeoutStopSec=(\d+)$/m.exec(read('deploy', 'msgd.service'))![1]);
    expect(msgd.stop_grace_period).toBe(`${unitStop}s`);
    expect(msgd.ports).toEqual(['127.0.0.1:8080:8080']);
    expect(msgd.command).toEqual(['--no-demo']);
  });
});
