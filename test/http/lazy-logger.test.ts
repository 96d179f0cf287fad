import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LazyRequestLogger, createLogger } from '../../src/web/logger.js';

// A request's logger is made only when the request logs, and then logs exactly as pino's
// child would: with the request id bound and the redaction applied.

function capture(level = 'info') {
  const lines: Record<string, unknown>[] = [];
  const dest = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { logger: createLogger(level, { destination: dest }), lines };
}

describe('LazyRequestLogger', () => {
  it('makes no child until something logs, then logs with the bindings and redaction of a child', () => {
    const { logger, lines } = capture();
    let children = 0;
    const child = logger.child.bind(logger);
    logger.child = ((b: any, o: any) => (children++, child(b, o))) as typeof logger.child;
    const log = new LazyRequestLogger(logger, { reqId: 'req_1' }, {});
    expect(log.level).toBe('info');
    expect(children).toBe(0);
    log.error({ req: { headers: { authorization: 'Bearer msgd_live_secret' } }, status: 500 }, 'request failed');
    log.debug('not at info');
    log.warn('again');
    expect(children).toBe(1);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({ level: 50, reqId: 'req_1', status: 500, msg: 'request failed', service: 'msgd' });
    expect(JSON.stringify(lines)).not.toContain('msgd_live_secret');
    expect(lines[1]).toMatchObject({ level: 40, reqId: 'req_1', msg: 'again' });
  });

  it('takes a level of its own, and makes children of its own', () => {
    const { logger, lines } = capture();
    const log = new LazyRequestLogger(logger, { reqId: 'req_2' }, { level: 'debug' });
    expect(log.level).toBe('debug');
    log.debug('shown at debug');
    log.child({ part: 'x' }).info('from a child');
    log.level = 'error';
    log.warn('hidden at error');
    expect(lines.map((l) => [l.msg, l.reqId, l.part])).toEqual([
      ['shown at debug', 'req_2', undefined],
      ['from a child', 'req_2', 'x'],
    ]);
  });
});
