// Every key the console answers to, in one place: the footer shows a screen's most needed
// keys that fit the width (its actions before the global keys), `?` lists them all.

export type ScreenId = 'overview' | 'partners' | 'gateways' | 'webhooks' | 'messages' | 'jobs';

export const SCREENS: { id: ScreenId; key: string; title: string }[] = [
  { id: 'overview', key: '1', title: 'Overview' },
  { id: 'partners', key: '2', title: 'Partners' },
  { id: 'gateways', key: '3', title: 'Gateways' },
  { id: 'webhooks', key: '4', title: 'Webhooks' },
  { id: 'messages', key: '5', title: 'Messages' },
  { id: 'jobs', key: '6', title: 'Jobs' },
];

/** A key, what it does (the ? list), and its word in the footer (none: only in the ? list). */
export type Binding = [keys: string, what: string, short?: string];

export const GLOBAL_KEYS: Binding[] = [
  ['1-6, Tab, S-Tab', 'switch screen'],
  ['↑↓ or j/k', 'move'],
  ['g / G', 'top / bottom'],
  ['PgUp / PgDn', 'a page up / down'],
  ['Enter', 'open'],
  ['Esc', 'back'],
  ['?', 'all keys'],
  ['q, Ctrl-C', 'quit'],
];

// In order of need: the footer takes them from the top while they fit.
export const SCREEN_KEYS: Record<ScreenId, Binding[]> = {
  overview: [],
  partners: [
    ['i', 'issue token', 'token'],
    ['A', 'assign channel', 'channel'],
    ['t', 'top up', 'top up'],
    ['a', 'adjust balance', 'adjust'],
    ['c', 'credit limit', 'credit'],
    ['n', 'new partner', 'new'],
    ['/', 'filter (type to narrow)', 'filter'],
    ['s', 'suspend / activate', 'suspend'],
    ['r', 'revoke token', 'revoke'],
    ['u', 'unassign channel', 'unassign'],
    ['L', 'the whole ledger, by pages (in the detail)', 'ledger'],
  ],
  gateways: [
    ['n', 'add gateway', 'add'],
    ['e', 'edit settings and secrets', 'edit'],
    ['d', 'disable / enable', 'disable'],
    ['p', 'set a price', 'price'],
    ['P', 'all prices (per channel and partner)', 'prices'],
    ['/', 'filter (type to narrow)', 'filter'],
    ['t', "read a WhatsApp gateway's templates from Meta now", 'templates'],
  ],
  webhooks: [
    ['Space', 'pause / resume', 'pause'],
    ['/', 'filter: provider, gateway, verdict, text', 'filter'],
    ['o', 'show deliveries out too', 'out too'],
    ['Enter', 'detail', 'detail'],
    ['R', 'reprocess (unroutable)', 'reprocess'],
    ['G', 'follow the newest'],
  ],
  messages: [
    ['/', 'find', 'find'],
    ['Enter', 'history', 'history'],
  ],
  jobs: [
    ['d', 'dead / waiting', 'dead/waiting'],
    ['R', 'retry dead job', 'retry'],
  ],
};

const text = (keys: Binding[]) => keys.map(([k, what, short]) => `${k} ${short ?? what}`).join(' · ');

/** The footer: as many of the screen's keys as fit in `width`, by need, then always ? and q. */
export function footer(screen: ScreenId, mode: 'list' | 'detail' | 'form', width: number): string {
  if (mode === 'form')
    return text([
      ['Tab/↑↓', 'field'],
      ['←→', 'choose'],
      ['Enter', 'submit'],
      ['Esc', 'cancel'],
    ]);
  const always: Binding[] = [
    ...(mode === 'detail' ? ([['Esc', 'back']] as Binding[]) : []),
    ['?', 'all'],
    ['q', 'quit'],
  ];
  const shown: Binding[] = [];
  for (const b of SCREEN_KEYS[screen]) {
    if (!b[2]) continue;
    if (text([...shown, b, ...always]).length > width) continue;
    shown.push(b);
  }
  return text([...shown, ...always]);
}
