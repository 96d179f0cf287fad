import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Tests that spawn bin/msgd or bin/msgctl run the compiled dist/: build it once first so
// they never run stale code. The OpenAPI client check runs TypeScript 5 and Redocly from a
// tool folder with its own lockfile: install it the first time, so `npm test` alone works.
export default function setup() {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  // As `npm run build` compiles: incremental, its state in dist/ (gone with dist/), so that a
  // dist/ already built from the same sources (CI's npm pack, the other suite's run) is only checked.
  execFileSync(
    process.execPath,
    [
      join(root, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      join(root, 'tsconfig.json'),
      '--incremental',
      '--tsBuildInfoFile',
      join(root, 'dist', '.tsbuildinfo'),
    ],
    { stdio: 'inherit' },
  );
  const tools = join(root, 'tools', 'openapi-check');
  if (!existsSync(join(tools, 'node_modules', '.bin', 'openapi-typescript'))) {
    process.stdout.write('installing tools/openapi-check from its lockfile (once)\n');
    execFileSync('npm', ['ci', '--prefix', tools, '--no-audit', '--no-fund'], { stdio: 'inherit' });
  }
}
