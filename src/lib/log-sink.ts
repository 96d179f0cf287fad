import { write as fsWrite, writeSync } from 'node:fs';

// msgd's log destination. Lines are written to a file descriptor (stdout) in the background,
// one write in flight at a time, so a slow or broken destination never blocks the event
// loop: pino's own destination retries a failed synchronous write forever, and with stdout on
// a full disk msgd then stopped answering and ignored SIGTERM. Here a write that fails (a full
// disk, a file-size limit, a reader that went away) pauses logging: lines are dropped and
// counted, one notice goes to stderr, and the destination is tried again every few seconds.

/** Errors that mean "the destination is full": waiting lets it drain. */
const BUSY = new Set(['EAGAIN', 'EWOULDBLOCK', 'EBUSY', 'EINTR']);

export interface LogSinkOptions {
  fd?: number;
  /** Lines waiting beyond this many bytes are dropped (a destination slower than msgd's logging). */
  maxBufferBytes?: number;
  /** How often a failed destination is tried again. */
  retryMs?: number;
  /** Where the one notice per failure goes; stderr by default, never allowed to throw. */
  notify?: (text: string) => void;
}

export interface LogSinkState {
  /** The error code that paused logging, or null while lines are written. */
  failed: string | null;
  dropped: number;
  written: number;
}

export class LogSink {
  readonly fd: number;
  private readonly maxBufferBytes: number;
  private readonly retryMs: number;
  private readonly notify: (text: string) => void;
  private pending: string[] = [];
  private pendingBytes = 0;
  private writing = false;
  private failedCode: string | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private busyTimer: NodeJS.Timeout | null = null;
  private droppedLines = 0;
  private droppedSinceNotice = 0;
  private writtenLines = 0;

  constructor(opts: LogSinkOptions = {}) {
    this.fd = opts.fd ?? 1;
    this.maxBufferBytes = opts.maxBufferBytes ?? 8 * 1024 * 1024;
    this.retryMs = opts.retryMs ?? 10_000;
    this.notify = opts.notify ?? stderrNotice;
  }

  get state(): LogSinkState {
    return { failed: this.failedCode, dropped: this.droppedLines, written: this.writtenLines };
  }

  /** pino calls this with one serialized line at a time. */
  write(line: string): boolean {
    if (this.failedCode !== null || this.pendingBytes + line.length > this.maxBufferBytes) {
      this.droppedLines++;
      this.droppedSinceNotice++;
      return true;
    }
    this.pending.push(line);
    this.pendingBytes += line.length;
    if (!this.writing && this.busyTimer === null) this.flushAsync();
    return true;
  }

  /**
   * Write what is waiting before the process exits, without ever blocking for long: a
   * destination that refuses or stays full for a moment gets the rest dropped.
   */
  flushSync(deadlineMs = 500): void {
    if (this.failedCode !== null || this.pending.length === 0) return;
    const deadline = Date.now() + deadlineMs;
    let buf = Buffer.from(this.pending.join(''));
    this.pending = [];
    this.pendingBytes = 0;
    while (buf.length > 0) {
      try {
        buf = buf.subarray(writeSync(this.fd, buf));
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
        if (!BUSY.has(code) || Date.now() >= deadline) {
          this.fail(code);
          return;
        }
      }
    }
  }

  /**
   * Before a clean exit: let the write in flight and the lines behind it go out in order, for at
   * most `deadlineMs`, then write what is left at once. A synchronous write made while an
   * asynchronous one is still in flight can land before it, putting "msgd stopped" above
   * "msgd shutting down".
   */
  async flushBeforeExit(deadlineMs = 500): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    while ((this.writing || this.busyTimer !== null) && this.failedCode === null && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 2));
    this.flushSync(Math.max(0, deadline - Date.now()));
  }

  /** Stop the retry timer (the process is exiting or the sink is replaced). */
  close(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    if (this.busyTimer) clearTimeout(this.busyTimer);
    this.retryTimer = this.busyTimer = null;
  }

  private flushAsync(): void {
    if (this.pending.length === 0) return;
    const buf = Buffer.from(this.pending.join(''));
    const lines = this.pending.length;
    this.pending = [];
    this.pendingBytes = 0;
    this.writing = true;
    this.writeOut(buf, lines);
  }

  private writeOut(buf: Buffer, lines: number): void {
    fsWrite(this.fd, buf, 0, buf.length, null, (err, n) => {
      if (err) {
        if (BUSY.has(err.code ?? '')) {
          // A pipe whose reader is behind: try the same bytes again shortly.
          this.busyTimer = setTimeout(() => {
            this.busyTimer = null;
            this.writeOut(buf, lines);
          }, 20);
          this.busyTimer.unref();
          return;
        }
        this.writing = false;
        this.droppedLines += lines;
        this.droppedSinceNotice += lines;
        this.fail(err.code ?? 'EIO');
        return;
      }
      if (n < buf.length) return this.writeOut(buf.subarray(n), lines);
      this.writing = false;
      this.writtenLines += lines;
      this.flushAsync();
    });
  }

  private fail(code: string): void {
    const first = this.failedCode === null;
    this.droppedLines += this.pending.length;
    this.droppedSinceNotice += this.pending.length;
    this.pending = [];
    this.pendingBytes = 0;
    this.failedCode = code;
    if (first) {
      this.notify(
        `msgd: the log output cannot be written (${code}${describe(code)}): msgd keeps running with ` +
          `logging paused, dropping log lines, and tries the log output again every ${Math.round(this.retryMs / 1000)} s\n`,
      );
    }
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.retry();
    }, this.retryMs);
    this.retryTimer.unref();
  }

  private retry(): void {
    const dropped = this.droppedSinceNotice;
    const line =
      JSON.stringify({
        level: 40,
        time: new Date().toISOString(),
        service: 'msgd',
        dropped,
        msg: `log output works again after failing with ${this.failedCode}: ${dropped} log lines were dropped`,
      }) + '\n';
    const buf = Buffer.from(line);
    fsWrite(this.fd, buf, 0, buf.length, null, (err, n) => {
      if (err || n < buf.length) return this.scheduleRetry();
      this.failedCode = null;
      this.droppedSinceNotice = 0;
      this.notify(`msgd: the log output works again (${dropped} log lines were dropped while it failed)\n`);
      this.flushAsync();
    });
  }
}

function describe(code: string): string {
  switch (code) {
    case 'ENOSPC':
      return ': no space left on the device';
    case 'EFBIG':
      return ': the file-size limit is reached';
    case 'EPIPE':
      return ': the reader of the output went away';
    case 'EIO':
      return ': input/output error';
    default:
      return '';
  }
}

/** Straight to file descriptor 2: process.stderr would emit an unhandled 'error' on a broken fd. */
function stderrNotice(text: string): void {
  try {
    writeSync(2, text);
  } catch {
    // stderr is broken too: nothing is left to tell.
  }
}
