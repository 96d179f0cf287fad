import type { ReactNode } from 'react';
import { renderToStaticMarkup } from 'react-dom/server';
import type { FastifyReply } from 'fastify';
import type { SessionPerson, SessionUser } from '../core/ui-sessions.js';
import { can, type Area } from '../core/users.js';
import { CSRF_FIELD } from './csrf.js';

// The page frame and the small pieces every page uses. React escapes every value it renders,
// so partner, customer and provider text always arrives as text, never as markup.

const NAV: [Area, string, string][] = [
  ['overview', 'Overview', '/ui/overview'],
  ['messages', 'Messages', '/ui/messages'],
  ['conversations', 'Conversations', '/ui/conversations'],
  ['webhooks', 'Webhooks', '/ui/webhooks'],
  ['tokens', 'API tokens', '/ui/tokens'],
  ['ledger', 'Ledger', '/ui/ledger'],
  ['channels', 'Channels', '/ui/channels'],
  ['templates', 'Templates', '/ui/templates'],
  ['suppressions', 'Suppressions', '/ui/suppressions'],
  ['users', 'Users', '/ui/users'],
];

export interface PageProps {
  title: string;
  user: SessionUser | null;
  /** A logged-in person with no partner picked (the partner picker): the header shows only who and Log out. */
  person?: SessionPerson | null;
  csrf: string;
  active?: Area;
  children: ReactNode;
}

export function Page({ title, user, person, csrf, active, children }: PageProps) {
  return (
    <html lang="en">
      <head>
        <meta charSet="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${title} · msgd console`}</title>
        <link rel="stylesheet" href="/ui/static/console.css" />
        <script src="/ui/static/console.js" defer></script>
      </head>
      <body>
        <header className="top">
          <a className="brand" href="/ui">
            msgd
          </a>
          {user && (
            <>
              <nav aria-label="Main">
                <ul>
                  {NAV.filter(([area]) => can(user.role, area)).map(([area, label, href]) => (
                    <li key={area}>
                      <a href={href} aria-current={active === area ? 'page' : undefined}>
                        {label}
                      </a>
                    </li>
                  ))}
                </ul>
              </nav>
              <div className="who">
                <a href="/v1/docs">API reference</a> · <a href="/ui/account">{user.email}</a>{' '}
                <span className="muted">
                  ({user.role}, {user.partnerName})
                </span>
                <PartnerSwitcher user={user} csrf={csrf} />
                <LogoutButton csrf={csrf} />
              </div>
            </>
          )}
          {!user && person && (
            <div className="who">
              <span>{person.email}</span> <LogoutButton csrf={csrf} />
            </div>
          )}
        </header>
        <main id="main">
          <h1>{title}</h1>
          {children}
        </main>
      </body>
    </html>
  );
}

function LogoutButton({ csrf }: { csrf: string }) {
  return (
    <form method="post" action="/ui/logout" className="inline">
      <Csrf token={csrf} />
      <button type="submit" className="link">
        Log out
      </button>
    </form>
  );
}

/** For a person of several partners, or with invitations waiting: switch partner without logging out. */
function PartnerSwitcher({ user, csrf }: { user: SessionUser; csrf: string }) {
  const waiting = user.invitations.length;
  if (user.partners.length < 2 && !waiting) return null;
  return (
    <>
      {user.partners.length > 1 && (
        <form method="post" action="/ui/partners" className="inline switcher">
          <Csrf token={csrf} />
          <label htmlFor="switch-partner" className="muted">
            Partner
          </label>{' '}
          <select id="switch-partner" name="partner" defaultValue={user.partnerId}>
            {user.partners.map((m) => (
              <option key={m.partner_id} value={m.partner_id}>
                {m.partner_name}
              </option>
            ))}
          </select>{' '}
          <button type="submit" className="secondary">
            Switch
          </button>
        </form>
      )}{' '}
      <a href="/ui/partners">{waiting ? `Invitations (${waiting})` : 'Partners'}</a>{' '}
    </>
  );
}

export const Csrf = ({ token }: { token: string }) => <input type="hidden" name={CSRF_FIELD} value={token} />;

export function Notice({ kind, children }: { kind: 'error' | 'ok' | 'secret'; children: ReactNode }) {
  return (
    <div className={`notice ${kind}`} role={kind === 'error' ? 'alert' : 'status'}>
      {children}
    </div>
  );
}

/**
 * A secret shown once, on the answer that made it: what it is, the value and a Copy button
 * (hidden until the page's script can copy). Whatever follows the button goes in children.
 */
export function ShownOnce({
  id,
  value,
  intro,
  children,
}: {
  id: string;
  value: string;
  intro: ReactNode;
  children?: ReactNode;
}) {
  return (
    <Notice kind="secret">
      <p>{intro}</p>
      <code className="secret" id={id}>
        {value}
      </code>
      <p>
        <button type="button" className="secondary" data-copy={id} hidden>
          Copy
        </button>
      </p>
      {children}
    </Notice>
  );
}

/** A page of a keyset-paged list: "Next" carries the cursor and the current filters. */
export function Pager({
  base,
  query,
  next,
}: {
  base: string;
  query: Record<string, string | undefined>;
  next: string | null;
}) {
  if (!next) return null;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v) q.set(k, v);
  q.set('cursor', next);
  return (
    <p className="pager">
      <a href={`${base}?${q}`}>Next page →</a>
    </p>
  );
}

export function sendPage(reply: FastifyReply, node: ReactNode, status = 200) {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .send('<!doctype html>' + renderToStaticMarkup(node));
}

export const utc = (ms: number | null | undefined) =>
  ms === null || ms === undefined ? '—' : new Date(ms).toISOString().slice(0, 19).replace('T', ' ') + ' UTC';

/** A moment: UTC as text in a <time> element, which the page's script also shows in the browser's zone. */
export function When({ ms }: { ms: number | null | undefined }) {
  if (ms === null || ms === undefined) return <>—</>;
  return <time dateTime={new Date(ms).toISOString()}>{utc(ms)}</time>;
}
