// Shared bench plumbing: child processes, a closed-loop HTTP load generator on undici, and
// latency percentiles. The load generator runs in this process; servers run in children,
// so client and server compete for the same 2 cores exactly as in DESIGN.md's figures.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
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
 * {path, body, headers}. `url` may be a list (several msgd on one store): connection i goes
 * to url i mod n, so the requests are spread round-robin. `around` ({ before(), after() }) is
 * called just before and after the measured run (CPU readings). Returns rps, latency
 * percentiles (ms), status counts and the 200s each url answered (`okByUrl`).
 */
export async function load(
  url,
  make,
  { connections = 50, seconds = 5, warmupSeconds = 1, method = 'POST', around = null } = {},
) {
  let i = 0;
  const first = make(0);
  const urls = Array.isArray(url) ? url : [url];
  const okByUrl = new Map(urls.map((u) => [new URL(u).port, 0]));
  let counting = false;
  const opts = {
    url: urls.length === 1 ? urls[0] : urls,
    connections,
    pipelining: 1,
    duration: seconds,
    method,
    headers: first.headers,
    requests: [{ method, path: first.path, headers: first.headers, setupRequest: (req) => ({ ...req, ...make(i++) }) }],
  };
  if (urls.length > 1) {
    opts.setupClient = (client) => {
      const port = String(client.opts.port);
      client.on('response', (status) => {
        if (counting && status === 200) okByUrl.set(port, (okByUrl.get(port) ?? 0) + 1);
      });
    };
  }
  await autocannon({ ...opts, duration: warmupSeconds });
  counting = true;
  await around?.before();
  const r = await autocannon(opts);
  await around?.after();
  counting = false;
  const statuses = {};
  for (const [code, v] of Object.entries(r.statusCodeStats ?? {})) statuses[code] = v.count;
  if (r.errors) statuses.errors = r.errors;
  if (r.timeouts) statuses.timeouts = r.timeouts;
  if (urls.length === 1) okByUrl.set(new URL(urls[0]).port, statuses[200] ?? 0);
  return {
    requests: r.requests.total,
    rps: r.requests.total / r.duration,
    p50: r.latency.p50,
    p99: r.latency.p99,
    p999: r.latency.p99_9,
    statuses,
    okByUrl: [...okByUrl.values()],
  };
}

const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** A process's /proc/<pid>/stat times in ms: { own: utime+stime, children: cutime+cstime, ppid }, or null. */
export function procTimes(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (in parentheses, which may hold spaces).
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ms = (k) => (Number(f[k]) * 1000) / CLK_TCK;
    return { ppid: Number(f[1]), own: ms(11) + ms(12), children: ms(13) + ms(14) };
  } catch {
    return null;
  }
}

/** CPU time (user + system, ms) a live process has used. */
export function cpuMs(pid) {
  return procTimes(pid)?.own ?? NaN;
}

/**
 * CPU time (ms) of a process and all its children, live or reaped: a PostgreSQL cluster's
 * postmaster with its backends and background processes.
 */
export function treeCpuMs(rootPid) {
  const rootTimes = procTimes(rootPid);
  if (!rootTimes) return NaN;
  // Reaped children's time is in the root's cutime/cstime; live ones are read one by one.
  let total = rootTimes.own + rootTimes.children;
  const parents = new Set([rootPid]);
  const all = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const t = procTimes(Number(name));
    if (t) all.push([Number(name), t]);
  }
  // Postgres's processes are the postmaster's direct children; a second pass catches grandchildren.
  for (let pass = 0; pass < 2; pass++) {
    for (const [pid, t] of all) {
      if (parents.has(t.ppid) && !parents.has(pid)) {
        parents.add(pid);
        total += t.own;
      }
    }
  }
  return total;
}

/**
 * Poll a count (sync or async; every 50 ms unless `everyMs`) until it reaches `target` or the deadline passes. The rate runs
 * from the first poll that saw any, so start-up time does not count against it.
 */
export async function rateUntil(count, target, timeoutMs, everyMs = 50) {
  let done = 0;
  let first = 0;
  let firstAt = 0;
  const deadline = Date.now() + timeoutMs;
  while (done < target && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, everyMs));
    done = await count();
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
