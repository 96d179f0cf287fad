import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// A clone where `npm ci` ran and `npm run build` did not: both commands say what to run.

const root = mkdtempSync(join(tmpdir(), 'msgd-unbuilt-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('without dist/', () => {
  it.each(['msgd', 'msgctl'])('%s names the build command and exits 1', (name) => {
    cpSync(join(import.meta.dirname, '../../bin'), join(root, 'bin'), { recursive: true });
    const r = spawnSync(process.execPath, [join(root, 'bin', name), '--version'], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(`${name}: dist/ is not built: run \`npm run build\` in ${root}/\n`);
  });
});
