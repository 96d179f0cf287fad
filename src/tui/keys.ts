import type { KeyPress } from './input.js';
import { createContext, useContext, useEffect, useRef } from 'react';

// One subscription to the terminal (the app's), and handlers registered while components
// render. Ink's own useInput subscribes in an effect, after the first frame is drawn: a key
// typed right after a form appears (a paste, a fast Tab) would reach nobody.

export type KeyHandler = (input: string, key: KeyPress) => void;

export class KeyRouter {
  private seq = 0;
  readonly handlers = new Map<number, { fn: KeyHandler; active: boolean }>();
  next(): number {
    return ++this.seq;
  }
  dispatch(input: string, key: KeyPress) {
    for (const h of [...this.handlers.values()]) if (h.active) h.fn(input, key);
  }
}

export const KeyContext = createContext<KeyRouter>(new KeyRouter());

/** Like Ink's useInput, but in force from the render that mounts the component. */
export function useKeys(fn: KeyHandler, opts: { isActive?: boolean } = {}) {
  const router = useContext(KeyContext);
  const id = useRef(0);
  if (id.current === 0) id.current = router.next();
  router.handlers.set(id.current, { fn, active: opts.isActive ?? true });
  useEffect(() => () => void router.handlers.delete(id.current), [router]);
}
