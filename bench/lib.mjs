// Shared bench plumbing: child processes, a closed-loop HTTP load generator on undici, and
// latency percentiles. The load generator runs in this process; servers run in children,
// so client and server compete for the same 2 cores exactly as in DESIGN.md's figures.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

export function tmp(prefix = 'msgd-bench-') {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** The node flags msgd runs with: read off bin/msgd's shebang, so the bench runs msgd as operators do. */
export const MSGD_NODE_FLAGS = (() => {
  const first = readFileSync(join(ROOT, 'bin', 'msgd'), 'utf8').split('\n')[0];
  return first.split(/\s+/).filter((a) => a.startsWith('--'));
})();

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Start a node child and resolve once `ready` matches its output. */
export function child(args, { env = {}, ready = /listening/i, timeoutMs = 20_000 } = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(
      () => reject(new Error(`child ${args.join(' ')} not ready: ${out.slice(-2000)}`)),
      timeoutMs,
    );
    const onData = (d) => {
      out += d.toString();
      if (ready.test(out)) {
        clearTimeout(timer);
        p.stdout.off('data', onData);
        p.stderr.off('data', onData);
        p.stdout.resume();
        p.stderr.resume();
        resolve(p);
      }
    };
    p.stdout.on('data', onData);
    p.stderr.on('data', onData);
    p.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`child exited ${code}: ${out.slice(-2000)}`));
    });
  });
}

export async function stop(p) {
  if (p.exitCode !== null) return;
  const done = new Promise((r) => p.once('exit', r));
  p.kill('SIGTERM');
  const t = setTimeout(() => p.kill('SIGKILL'), 15_000);
  await done;
  clearTimeout(t);
}

/** Peak resident set (VmHWM) of a live process, in MB. */
export function peakRssMb(pid) {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

export function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * Closed-loop load with autocannon (the client fastify benchmarks itself with):
 * `connections` requests in flight for `seconds` after a warm-up. `make(i)` returns
 * {path, body, headers}. Returns rps, latency percentiles (ms) and status counts.
 */
export async function load(url, make, { connections = 50, seconds = 5, warmupSeconds = 1, method = 'POST' } = {}) {
  let i = 0;
  const first = make(0);
  const opts = {
    url,
    connections,
    pipelining: 1,
    duration: seconds,
    method,
    headers: first.headers,
    requests: [{ method, path: first.path, headers: first.headers, setupRequest: (req) => ({ ...req, ...make(i++) }) }],
  };
  await autocannon({ ...opts, duration: warmupSeconds });
  const r = await autocannon(opts);
  const statuses = {};
  for (const [code, v] of Object.entries(r.statusCodeStats ?? {})) statuses[code] = v.count;
  if (r.errors) statuses.errors = r.errors;
  if (r.timeouts) statuses.timeouts = r.timeouts;
  return {
    requests: r.requests.total,
    rps: r.requests.total / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    p999: r.latency.p99_9,
    statuses,
  };
}

/**
 * Poll a count (every 50 ms) until it reaches `target` or the deadline passes. The rate runs
 * from the first poll that saw any, so start-up time does not count against it.
 */
export async function rateUntil(count, target, timeoutMs) {
  let done = 0;
  let first = 0;
  let firstAt = 0;
  const deadline = Date.now() + timeoutMs;
  while (done < target && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    done = count();
    if (!firstAt && done > 0) {
      firstAt = performance.now();
      first = done;
    }
  }
  const endedAt = performance.now();
  return { done, endedAt, rate: (done - first) / ((endedAt - firstAt) / 1000) };
}

export const fmt = (n, d = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : String(n);

/** A figure against its target: "12,345 /s (target >= 10,000) PASS". */
export function verdict(value, target, better = 'higher') {
  const ok = better === 'higher' ? value >= target : value <= target;
  return ok ? 'PASS' : 'MISS';
}
