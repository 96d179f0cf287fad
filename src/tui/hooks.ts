import { useStdout } from 'ink';
import { createContext, useContext, useEffect, useRef, useState } from 'react';
import type { TuiDeps } from './deps.js';

export interface Size {
  columns: number;
  rows: number;
}

/** The terminal's size, followed on resize; `fixed` wins (tests draw at exactly 80×24). */
export function useSize(fixed?: Size): Size {
  const { stdout } = useStdout();
  const read = (): Size => ({ columns: stdout?.columns || 80, rows: (stdout as { rows?: number })?.rows || 24 });
  const [size, setSize] = useState<Size>(fixed ?? read());
  useEffect(() => {
    if (fixed) return;
    const onResize = () => setSize(read());
    stdout?.on('resize', onResize);
    return () => {
      stdout?.off('resize', onResize);
    };
  }, [stdout, fixed]);
  return fixed ?? size;
}

const isThenable = <T>(x: T | Promise<T>): x is Promise<T> =>
  typeof (x as { then?: unknown } | null)?.then === 'function';

/**
 * Read now and every `ms` while mounted: each read is a few statements that finish at once
 * (no transaction stays open between reads, so msgd's WAL checkpoints are never held up).
 * A read may be async (through the store): its data shows when it resolves.
 * A read that throws (or rejects) is shown, and tried again on the next tick.
 */
export function usePoll<T>(
  ms: number,
  read: () => T | Promise<T>,
  keys: unknown[] = [],
  paused = false,
): { data: T | null; error: string | null; reload(): void } {
  const deps = useDeps();
  const failed = (e: unknown) => setState((s) => ({ data: s.data, error: deps.describeError(e) }));
  // A synchronous first read is made here, so the first frame already shows data.
  const [state, setState] = useState<{ data: T | null; error: string | null }>(() => {
    if (paused) return { data: null, error: null };
    try {
      const data = read();
      if (!isThenable(data)) return { data, error: null };
      data.then(show, failed);
      return { data: null, error: null };
    } catch (e) {
      return { data: null, error: deps.describeError(e) };
    }
  });
  const readRef = useRef(read);
  readRef.current = read;
  const first = useRef(true);
  const last = useRef<{ data: unknown; json: string | null }>({ data: state.data, json: null });
  function show(data: T) {
    // Unchanged figures draw nothing: no render, no layout, no bytes to the terminal.
    if (data === last.current.data) return;
    const json =
      data !== null && typeof data === 'object' && !('length' in data && (data as unknown[]).length > 500)
        ? JSON.stringify(data)
        : null;
    if (json !== null && json === last.current.json) return;
    last.current = { data, json };
    setState({ data, error: null });
  }
  const tick = () => {
    try {
      const data = readRef.current();
      if (isThenable(data)) data.then(show, failed);
      else show(data);
    } catch (e) {
      failed(e);
    }
  };
  useEffect(() => {
    if (paused) return;
    // Mounting read already; a change of keys or a resume reads at once.
    if (!first.current) tick();
    first.current = false;
    const t = setInterval(tick, ms);
    return () => clearInterval(t);
  }, [ms, paused, ...keys]);
  return { ...state, reload: tick };
}

export const DepsContext = createContext<TuiDeps | null>(null);
export function useDeps(): TuiDeps {
  const d = useContext(DepsContext);
  if (!d) throw new Error('the console has no data directory');
  return d;
}

export type Mode = 'list' | 'detail' | 'form';

export interface ModeControl {
  /** Read by the key router at once; the footer follows through set(). */
  current: { mode: Mode };
  set(m: Mode): void;
}

/** Screens say whether they hold the keyboard (a form): then the global keys stand back. */
export const ModeContext = createContext<ModeControl>({ current: { mode: 'list' }, set: () => {} });

export function useMode(mode: Mode) {
  const ctl = useContext(ModeContext);
  ctl.current.mode = mode;
  useEffect(() => ctl.set(mode), [mode]);
}

export type FlashState = { ok: boolean; text: string } | null;
