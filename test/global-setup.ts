import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// Tests that spawn bin/msgd or bin/msgctl run the compiled dist/: build it once first so
// they never run stale code.
export default function setup() {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  execFileSync(
    process.execPath,
    [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json')],
    {
      stdio: 'inherit',
    },
  );
}
