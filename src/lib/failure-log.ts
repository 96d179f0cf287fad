// Failures logged so an outage reads as a few lines a minute, not one per attempt: per key (a
// gateway, an endpoint, a provider's refusals) the first failure of a spell is logged at once
// with its details, later ones are counted by code and summed up at most every intervalMs,
// and the first success after them says the spell is over.

type LogFn = (obj: object, msg?: string) => void;

/** msgd's pino logger, or the job loop's narrower one: info, and the level a spell is logged at. */
export interface InfoLogger {
  info: LogFn;
  warn?: LogFn;
  error?: LogFn;
}

interface Spell {
  since: number;
  lastLogAt: number;
  /** Failures since the spell began, and since the last line. */
  total: number;
  count: number;
  codes: Record<string, number>;
  fields: Record<string, unknown>;
  timer: NodeJS.Timeout | null;
}

export interface FailureLogOptions {
  /** What fails, for the summary lines: "send attempts", "deliveries". */
  what: string;
  intervalMs?: number;
  now?: () => number;
  /**
   * The level of a spell's first line and its summaries (default info): error for a fault of
   * msgd's own (its database refusing writes). The line saying the spell is over is info.
   */
  level?: 'info' | 'warn' | 'error';
}

export class FailureLog {
  private readonly spells = new Map<string, Spell>();
  private readonly intervalMs: number;
  private readonly now: () => number;

  constructor(
    private readonly logger: InfoLogger,
    private readonly opts: FailureLogOptions,
  ) {
    this.intervalMs = opts.intervalMs ?? 15_000;
    this.now = opts.now ?? Date.now;
  }

  /** A failure: `fields` name the key's subject (gateway, provider) and this failure's details. */
  failure(key: string, code: string, fields: Record<string, unknown>, msg: string): void {
    const spell = this.spells.get(key);
    const now = this.now();
    if (!spell) {
      this.spells.set(key, { since: now, lastLogAt: now, total: 1, count: 0, codes: {}, fields, timer: null });
      this.log({ ...fields, code }, msg);
      return;
    }
    spell.fields = fields;
    spell.total++;
    spell.count++;
    spell.codes[code] = (spell.codes[code] ?? 0) + 1;
    if (spell.timer === null) {
      spell.timer = setTimeout(() => this.summary(key), Math.max(0, spell.lastLogAt + this.intervalMs - now));
      spell.timer.unref();
    }
  }

  /** A success: ends the key's spell of failures, if there is one (a map lookup otherwise). */
  success(key: string, fields: Record<string, unknown> = {}): void {
    if (this.spells.size === 0) return;
    const spell = this.spells.get(key);
    if (!spell) return;
    if (spell.timer) clearTimeout(spell.timer);
    this.spells.delete(key);
    const seconds = Math.round((this.now() - spell.since) / 1000);
    this.logger.info(
      { ...subject(spell.fields), ...fields, failures: spell.total, since: new Date(spell.since).toISOString() },
      `${this.opts.what} succeed again after ${spell.total} failures in ${seconds} s`,
    );
  }

  private log(obj: object, msg: string): void {
    const level = this.opts.level ?? 'info';
    const fn = this.logger[level] ?? this.logger.info;
    fn.call(this.logger, obj, msg);
  }

  private summary(key: string): void {
    const spell = this.spells.get(key);
    if (!spell) return;
    spell.timer = null;
    if (spell.count === 0) return;
    const now = this.now();
    const seconds = Math.round((now - spell.lastLogAt) / 1000);
    this.log(
      {
        ...subject(spell.fields),
        failures: spell.count,
        codes: spell.codes,
        since: new Date(spell.since).toISOString(),
      },
      `${spell.count} more ${this.opts.what} failed in the last ${seconds} s`,
    );
    spell.lastLogAt = now;
    spell.count = 0;
    spell.codes = {};
  }
}

/** The fields that name what failed, without one failure's own details (its message id). */
function subject(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['gateway', 'gatewayId', 'provider', 'endpointId', 'url', 'status', 'workerId'])
    if (k in fields) out[k] = fields[k];
  return out;
}
