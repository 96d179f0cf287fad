import { readFileSync } from 'node:fs';

/** msgd's version, from its package.json (one level above src/ and dist/). */
export const VERSION: string = readVersion();

function readVersion(): string {
  try {
    return JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;
  } catch {
    return 'unknown';
  }
}
