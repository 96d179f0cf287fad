import type { ServerState } from '../core/counter-store.js';

// The heartbeat says msgd is running for up to 10 s after it was killed. Where the console
// runs on msgd's own host (the heartbeat names it), the pid tells at once: signal 0 checks
// that a process exists without touching it. Another host (or another pid namespace: msgd
// in a container has its own hostname) has only the heartbeat to go by.

export type Liveness = ServerState & { gone?: boolean };

/** Whether a process with this pid exists here (EPERM: it does, as another user's). */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

export function liveness(s: ServerState, host: string, alive: (pid: number) => boolean = pidAlive): Liveness {
  if (s.state === 'stopped' || !s.hb?.host || s.hb.host !== host || !(s.hb.pid > 0)) return s;
  return alive(s.hb.pid) ? s : { state: 'stopped', hb: s.hb, gone: true };
}
