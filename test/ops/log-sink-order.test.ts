import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, open, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LogSink } from '../../src/lib/log-sink.js';

// msgd's last log lines at a clean stop come out in the order they were logged, even when the
// background write of the earlier ones has not finished when the exit begins.

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('the log sink at exit', () => {
  it('writes a line still in flight before the lines logged after it', async () => {
    dir = mkdtempSync(join(tmpdir(), 'msgd-logsink-'));
    const file = join(dir, 'stdout.log');
    const out = openSync(file, 'w');
    const sink = new LogSink({ fd: out });
    // Every thread of libuv's pool waits in open() on a FIFO nobody writes to yet, so the sink's
    // background write of the first line stays queued while the exit begins.
    const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    const fifos = Array.from({ length: threads }, (_, i) => join(dir, `fifo-${i}`));
    for (const f of fifos) execFileSync('mkfifo', [f]);
    const held = fifos.map(
      (f) => new Promise<number>((resolve, reject) => open(f, 'r', (e, fd) => (e ? reject(e) : resolve(fd)))),
    );
    sink.write('msgd shutting down\n');
    sink.write('msgd stopped\n');
    const exiting = sink.flushBeforeExit(5_000);
    await new Promise((r) => setTimeout(r, 50));
    // The pool is free again: the queued write goes out.
    const writers = fifos.map((f) => openSync(f, 'w'));
    await exiting;
    for (const fd of [...writers, ...(await Promise.all(held)), out]) closeSync(fd);
    expect(readFileSync(file, 'utf8')).toBe('msgd shutting down\nmsgd stopped\n');
  });
});
