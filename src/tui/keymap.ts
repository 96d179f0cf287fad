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

/** The footer: the screen's keys first, then the global few. */
export function footerKeys(screen: ScreenId, mode: 'list' | 'detail' | 'form'): Binding[] {
  if (mode === 'form')
    return [
      ['Tab/↑↓', 'field'],
      ['Enter', 'submit'],
      ['Esc', 'cancel'],
    ];
  const own = SCREEN_KEYS[screen];
  return [...own.slice(0, mode === 'detail' ? 9 : 4), ['?', 'keys'], ['q', 'quit']];
}
