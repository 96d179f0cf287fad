import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { render } from 'ink-testing-library';
import { openCli, type Cli } from '../../src/cli/context.js';
import { tuiDeps } from '../../src/cli/tui.js';
import { openDataDir } from '../../src/db/datadir.js';
import { App } from '../../src/tui/app.js';
import type { ScreenId } from '../../src/tui/keymap.js';
import { sleep, waitFor } from '../helpers/wait.js';

// The console drawn at 80×24 by ink-testing-library over a real data directory, opened the way
// msgctl tui opens it (openCli, the same deps), and driven by keystrokes.

export const KEY = {
  enter: '\r',
  esc: '\x1b',
  tab: '\t',
  up: '\x1b[A',
  down: '\x1b[B',
  right: '\x1b[C',
  left: '\x1b[D',
  backspace: '\x7f',
};

/** A frame's text without box borders and line breaks, for sentences a box wraps. */
export function flat(frame: string): string {
  return frame
    .replace(/[│║╭╮╰╯╔╗╚╝─═]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

export interface Console {
  cli: Cli;
  frame(): string;
  /** Keystrokes, one write each (a string of letters is typed as one burst, as a paste would be). */
  press(...keys: string[]): Promise<void>;
  /** Wait until the frame contains `text` (or matches it), and return the frame. */
  see(text: string | RegExp, timeoutMs?: number): Promise<string>;
  unmount(): void;
  close(): void;
}

const dirs: string[] = [];

export function newDataDir(): string {
  const root = mkdtempSync(join(tmpdir(), 'msgd-tui-'));
  dirs.push(root);
  const dir = join(root, 'data');
  openDataDir(dir, { create: true }).close();
  return dir;
}

export function cleanupDirs() {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
}

export function openConsole(dataDir: string, screen?: ScreenId): Console {
  const cli = openCli({ dataDir });
  const deps = tuiDeps(cli);
  const r = render(<App deps={deps} size={{ columns: 80, rows: 24 }} initialScreen={screen} />);
  const frame = () => r.lastFrame() ?? '';
  return {
    cli,
    frame,
    async press(...keys) {
      for (const k of keys) {
        r.stdin.write(k);
        // Ink reads input on its own tick and React renders after: let both happen (a new
        // screen subscribes to keys in an effect that runs after its first frame).
        await sleep(k === KEY.esc || /^[1-6\t]$/.test(k) ? 120 : 40);
      }
    },
    async see(text, timeoutMs = 4000) {
      const f = await waitFor(
        () => {
          const f = frame();
          return (typeof text === 'string' ? f.includes(text) : text.test(f)) ? f : '';
        },
        `the console to show ${String(text)}`,
        timeoutMs,
      ).catch((e: Error) => {
        throw new Error(`${e.message}; last frame:\n${frame()}`);
      });
      // The frame is drawn before the effects that subscribe its keys have run.
      await sleep(30);
      return f;
    },
    unmount: () => r.unmount(),
    close() {
      r.unmount();
      cli.dir.close();
    },
  };
}
