// Every key the console answers to, in one place: the footer shows a screen's few, `?` all.

export type ScreenId = 'overview' | 'partners' | 'gateways' | 'webhooks' | 'messages' | 'jobs';

export const SCREENS: { id: ScreenId; key: string; title: string }[] = [
  { id: 'overview', key: '1', title: 'Overview' },
  { id: 'partners', key: '2', title: 'Partners' },
  { id: 'gateways', key: '3', title: 'Gateways' },
  { id: 'webhooks', key: '4', title: 'Webhooks' },
  { id: 'messages', key: '5', title: 'Messages' },
  { id: 'jobs', key: '6', title: 'Jobs' },
];

export type Binding = [keys: string, what: string];

export const GLOBAL_KEYS: Binding[] = [
  ['1-6, Tab, S-Tab', 'switch screen'],
  ['↑↓ or j/k', 'move'],
  ['Enter', 'open'],
  ['Esc', 'back'],
  ['?', 'all keys'],
  ['q, Ctrl-C', 'quit'],
];

export const SCREEN_KEYS: Record<ScreenId, Binding[]> = {
  overview: [],
  partners: [
    ['n', 'new partner'],
    ['t', 'top up'],
    ['a', 'adjust balance'],
    ['c', 'credit limit'],
    ['s', 'suspend / activate'],
    ['i', 'issue token'],
    ['r', 'revoke token'],
    ['g', 'assign channel'],
    ['u', 'unassign channel'],
  ],
  gateways: [
    ['n', 'add gateway'],
    ['e', 'edit settings and secrets'],
    ['d', 'disable / enable'],
    ['p', 'set a price'],
  ],
  webhooks: [
    ['Space', 'pause / resume'],
    ['/', 'filter'],
    ['o', 'show deliveries out too'],
    ['Enter', 'detail'],
    ['R', 'reprocess (unroutable)'],
  ],
  messages: [
    ['/', 'find'],
    ['Enter', 'history'],
  ],
  jobs: [
    ['d', 'dead / waiting'],
    ['R', 'retry dead job'],
  ],
};

const text = (keys: Binding[]) => keys.map(([k, what]) => `${k} ${what}`).join(' · ');

/** The footer: as many of the screen's keys as fit in `width`, then always ? and q. */
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
    ['?', 'keys'],
    ['q', 'quit'],
  ];
  const shown: Binding[] = [];
  for (const b of SCREEN_KEYS[screen]) {
    if (text([...shown, b, ...always]).length > width) break;
    shown.push(b);
  }
  return text([...shown, ...always]);
}
