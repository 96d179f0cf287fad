// A clock a test can move forward. It runs with real time (timers, sockets and the job loop
// keep working as in production) plus whatever the test has added, so "an hour later" takes
// no hour: token expiry, grace periods and due jobs are reached by advance(), not by sleeping.

export interface TestClock {
  /** Milliseconds since the epoch, as msgd sees them. */
  now: () => number;
  /** Move msgd's time forward by `ms`. */
  advance(ms: number): void;
}

export function testClock(): TestClock {
  let offset = 0;
  return {
    now: () => Date.now() + offset,
    advance(ms: number) {
      if (!(ms >= 0)) throw new Error(`a clock only moves forward (advance(${ms}))`);
      offset += ms;
    },
  };
}
