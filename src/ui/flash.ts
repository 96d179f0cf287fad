import { randomBytes } from 'node:crypto';

// What a POST shows on the page it redirects to (Post/Redirect/Get): a reload of that page
// repeats a GET, never the POST, so issuing a token or registering an endpoint happens once.
// A one-time secret travels here, never in the URL: in memory only (never on disk, gone on
// restart), bound to the session that made it, taken by the first GET of the page it names
// (so it is shown exactly once) and dropped after FLASH_TTL_MS if that GET never comes.

export const FLASH_TTL_MS = 2 * 60_000;
/** Notes kept per session: a user posting in several tabs gets each one, not unbounded memory. */
const PER_SESSION = 8;

export interface FlashNote {
  ok?: string;
  error?: string;
  /** A one-time secret and the words that introduce it. */
  secret?: { label: string; value: string };
}

interface Entry {
  key: string;
  path: string;
  note: FlashNote;
  expires: number;
}

export class Flash {
  private bySession = new Map<string, Entry[]>();

  constructor(private now: () => number) {}

  /**
   * Keep a note for the session's next GET of `path`; the returned key goes in the redirect's
   * query (`?flash=…`) so that a second tab's note is not shown in the first.
   */
  put(sessionId: string, path: string, note: FlashNote): string {
    this.sweep();
    const key = randomBytes(9).toString('base64url');
    const list = (this.bySession.get(sessionId) ?? []).slice(-(PER_SESSION - 1));
    list.push({ key, path, note, expires: this.now() + FLASH_TTL_MS });
    this.bySession.set(sessionId, list);
    return key;
  }

  /** The note kept for the session, page and key, removed as it is read; null when none. */
  take(sessionId: string, path: string, key: string | undefined): FlashNote | null {
    if (!key) return null;
    const list = this.bySession.get(sessionId);
    if (!list) return null;
    const i = list.findIndex((e) => e.key === key && e.path === path);
    if (i < 0) return null;
    const [entry] = list.splice(i, 1);
    if (list.length === 0) this.bySession.delete(sessionId);
    return entry.expires > this.now() ? entry.note : null;
  }

  private sweep() {
    const now = this.now();
    for (const [sid, list] of this.bySession) {
      const live = list.filter((e) => e.expires > now);
      if (live.length === 0) this.bySession.delete(sid);
      else if (live.length !== list.length) this.bySession.set(sid, live);
    }
  }
}
