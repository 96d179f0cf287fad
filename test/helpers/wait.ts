import net from 'node:net';
import { SqliteOnlyError } from '../../src/db/open-store.js';

// Waiting on real things (a socket, a row, a child process) without fixed sleeps: poll a
// predicate until it holds, and say what was awaited when it never does.

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Let the event loop go round once (timers and I/O callbacks due now run first). */
export const nextTurn = () => new Promise<void>((r) => setImmediate(r));

/**
 * Poll `predicate` (sync or async) every `intervalMs` until it returns a truthy value, and
 * return that value. Throws after `timeoutMs`, naming `what` and the last value or error seen:
 * `await waitFor(() => receiver.delivered.includes(id), 'the event to be delivered')`. A read
 * through the SQLite connection on PostgreSQL (SqliteOnlyError) never comes right: it throws at once.
 */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  what: string,
  timeoutMs = 5_000,
  intervalMs = 10,
): Promise<NonNullable<T>> {
  // Arguments in another order would give a deadline of NaN, polled until the test times out.
  if (typeof what !== 'string' || typeof timeoutMs !== 'number')
    throw new TypeError('waitFor(predicate, what: string, timeoutMs?: number, intervalMs?: number)');
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await predicate();
      if (v) return v as NonNullable<T>;
      last = v;
    } catch (e) {
      if (e instanceof SqliteOnlyError) throw e;
      last = e;
    }
    if (Date.now() >= deadline) {
      const seen = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${seen})`);
    }
    await sleep(intervalMs);
  }
}

/** A TCP port that was free a moment ago (bind to 0, read it, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Resolve when a child process exits: its code and signal, or throw after timeoutMs. */
export function waitForExit(
  child: import('node:child_process').ChildProcess,
  timeoutMs = 10_000,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const started = Date.now();
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode, ms: 0 });
  }
  return new Promise((resolve, reject) => {
    const t = setTimeout(
      () => reject(new Error(`process ${child.pid} did not exit within ${timeoutMs} ms`)),
      timeoutMs,
    );
    child.once('exit', (code, signal) => {
      clearTimeout(t);
      resolve({ code, signal, ms: Date.now() - started });
    });
  });
}
