import { hostname } from 'node:os';
import { Box, Text, useApp, useStdin } from 'ink';
import { Component, useEffect, useMemo, useRef, useState, type ReactNode } from 'react';
import { readInstances, serverState } from '../core/counter-store.js';
import type { TuiDeps } from './deps.js';
import { DepsContext, ModeContext, usePoll, useSize, type Mode, type Size } from './hooks.js';
import { KeySplitter, type KeyPress } from './input.js';
import { liveness } from './liveness.js';
import { KeyContext, KeyRouter } from './keys.js';
import { GLOBAL_KEYS, SCREENS, SCREEN_KEYS, footer, type Binding, type ScreenId } from './keymap.js';
import { GatewaysScreen } from './screens/gateways.js';
import { JobsScreen } from './screens/jobs.js';
import { MessagesScreen } from './screens/messages.js';
import { OverviewScreen } from './screens/overview.js';
import { PartnersScreen } from './screens/partners.js';
import { WebhooksScreen } from './screens/webhooks.js';
import { ThemeContext, makeTheme, useTheme } from './theme.js';
import { clean, duration, when } from './text.js';

export interface AppProps {
  deps: TuiDeps;
  /** Draw at this size instead of the terminal's (tests). */
  size?: Size;
  color?: boolean;
  initialScreen?: ScreenId;
}

/** The console: header (is msgd running), screen tabs, the screen, the keys that matter. */
export function App(props: AppProps) {
  return (
    <DepsContext.Provider value={props.deps}>
      <ThemeContext.Provider value={makeTheme(props.color ?? false)}>
        <Shell {...props} />
      </ThemeContext.Provider>
    </DepsContext.Provider>
  );
}

/**
 * Whether msgd runs, then the data directory. The state (version, uptime, pid) is never cut:
 * the directory gives way first, cut at its start with an ellipsis.
 */
export function headerParts(state: string, dir: string, width: number): { state: string; dir: string } {
  const room = width - state.length - 1;
  if (room >= dir.length) return { state, dir };
  if (room < 6) return { state: state.slice(0, width), dir: '' };
  return { state, dir: `…${dir.slice(dir.length - room + 1)}` };
}

function Header({ deps, width }: { deps: TuiDeps; width: number }) {
  const theme = useTheme();
  const hb = usePoll(1000, async () => {
    const all = await readInstances(deps.ctx);
    return { s: liveness(serverState(all.current, deps.ctx.now()), hostname()), alive: all.alive, dead: all.dead };
  });
  const s = hb.data?.s;
  // Several msgd sharing the store (PostgreSQL): how many run, and how many died. The
  // version, uptime and pid are the leader's.
  const alive = hb.data?.alive ?? 0;
  const dead = hb.data?.dead ?? 0;
  const cluster =
    alive > 1 || dead > 0 ? ` · ${alive} instance${alive === 1 ? '' : 's'}${dead > 0 ? `, ${dead} dead` : ''}` : '';
  let text = 'reading…';
  let style: { color?: string; bold?: boolean; dimColor?: boolean } = { dimColor: true };
  let detail = '';
  if (s?.state === 'running') {
    text = '● msgd running';
    detail = ` ${clean(s.hb.version)} · up ${duration(deps.ctx.now() - s.hb.startedAt)} · pid ${s.hb.pid}${cluster}`;
    style = { color: theme.good, bold: true };
  } else if (s?.state === 'silent') {
    text = `▲ msgd not responding: last beat ${when(s.hb!.beatAt)} UTC`;
    style = { color: theme.bad, bold: true };
  } else if (s) {
    text = s.gone
      ? `○ msgd not running (pid ${s.hb!.pid} is gone)`
      : `○ msgd not running${s.hb ? ` (stopped ${when(s.hb.beatAt)} UTC)` : ''}`;
    style = { color: theme.warn, bold: true };
  }
  const parts = headerParts(text + detail, clean(deps.dataDir), width);
  return (
    <Box width={width} justifyContent="space-between">
      <Text wrap="truncate-end">
        <Text {...style}>{parts.state.slice(0, text.length)}</Text>
        {parts.state.slice(text.length)}
      </Text>
      {parts.dir ? <Text dimColor>{parts.dir}</Text> : null}
    </Box>
  );
}

function Tabs({ screen }: { screen: ScreenId }) {
  return (
    <Text wrap="truncate-end">
      {SCREENS.map((s) => (
        <Text key={s.id} inverse={s.id === screen} bold={s.id === screen}>
          {` ${s.key} ${s.title} `}
        </Text>
      ))}
    </Text>
  );
}

function Footer({ screen, mode, width }: { screen: ScreenId; mode: Mode; width: number }) {
  return (
    <Text wrap="truncate-end" dimColor>
      {footer(screen, mode, width)}
    </Text>
  );
}

function Help({ screen, height, width }: { screen: ScreenId; height: number; width: number }) {
  const rows: Binding[] = [...SCREEN_KEYS[screen], ...GLOBAL_KEYS];
  const room = Math.max(1, height - 3);
  // Two columns when one does not hold them all.
  const columns = rows.length > room ? [rows.slice(0, room), rows.slice(room, room * 2)] : [rows];
  const colWidth = Math.floor((width - 4) / columns.length);
  return (
    <Box flexDirection="column" height={height} borderStyle="round" paddingX={1}>
      <Text bold>Keys ({SCREENS.find((s) => s.id === screen)!.title}) · any key closes</Text>
      <Box>
        {columns.map((col, c) => (
          <Box key={c} flexDirection="column" width={colWidth}>
            {col.map(([k, what]) => (
              <Text key={k + what} wrap="truncate-end">
                {k.padEnd(columns.length > 1 ? 12 : 18)} {what}
              </Text>
            ))}
          </Box>
        ))}
      </Box>
    </Box>
  );
}

/** An exception inside a screen is shown in its place; the console and the terminal stay usable. */
class ScreenBoundary extends Component<
  { children: ReactNode; resetKey: string },
  { error: Error | null; key: string }
> {
  state = { error: null as Error | null, key: this.props.resetKey };
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  static getDerivedStateFromProps(props: { resetKey: string }, state: { error: Error | null; key: string }) {
    return props.resetKey !== state.key ? { error: null, key: props.resetKey } : null;
  }
  render() {
    if (this.state.error)
      return (
        <Box flexDirection="column">
          <Text bold>This screen failed: {clean(this.state.error.message)}</Text>
          <Text>Switch screens (1-6) to carry on, or q to quit. MSGD_DEBUG=1 keeps the stack for a report.</Text>
        </Box>
      );
    return this.props.children;
  }
}

function Shell(props: AppProps) {
  const { exit } = useApp();
  const size = useSize(props.size);
  const [screen, setScreen] = useState<ScreenId>(props.initialScreen ?? 'overview');
  const [mode, setMode] = useState<Mode>('list');
  const modeRef = useRef<{ mode: Mode }>({ mode: 'list' });
  const modeCtl = useMemo(() => ({ current: modeRef.current, set: setMode }), []);
  const router = useMemo(() => new KeyRouter(), []);
  const [help, setHelp] = useState(false);
  const helpRef = useRef(false);
  const screenRef = useRef(screen);
  screenRef.current = screen;
  const [gen, setGen] = useState(0);
  const showHelp = (on: boolean) => {
    helpRef.current = on;
    setHelp(on);
  };
  const onKey = (input: string, key: KeyPress) => {
    if (key.ctrl && input === 'c') return exit();
    if (helpRef.current) return showHelp(false);
    if (modeRef.current.mode !== 'form') {
      // A paste is text for a form's field; on a list it is never read as keys.
      if (key.paste) return;
      if (input === 'q') return exit();
      if (input === '?') return showHelp(true);
      const byKey = SCREENS.find((s) => s.key === input);
      const i = SCREENS.findIndex((s) => s.id === screenRef.current);
      let next: ScreenId | null = byKey ? byKey.id : null;
      if (key.tab) next = SCREENS[(i + (key.shift ? SCREENS.length - 1 : 1)) % SCREENS.length].id;
      if (next) {
        if (next !== screenRef.current) {
          modeRef.current.mode = 'list';
          // The screen going away hears no more keys; the next one registers as it renders.
          router.handlers.clear();
          screenRef.current = next;
          setScreen(next);
          setGen((g) => g + 1);
        }
        return;
      }
    }
    router.dispatch(input, key);
  };
  const onKeyRef = useRef(onKey);
  onKeyRef.current = onKey;
  // Every chunk the terminal sends, split into keys, each handled in turn (input.ts).
  const { setRawMode, internal_eventEmitter: events } = useStdin();
  useEffect(() => {
    setRawMode(true);
    const splitter = new KeySplitter();
    const onInput = (data: string) => {
      for (const [input, key] of splitter.feed(data)) onKeyRef.current(input, key);
    };
    events.on('input', onInput);
    return () => {
      events.off('input', onInput);
      setRawMode(false);
    };
  }, [events, setRawMode]);
  const bodyHeight = Math.max(4, size.rows - 3);
  const body = { width: size.columns, height: bodyHeight };
  const screens: Record<ScreenId, ReactNode> = {
    overview: <OverviewScreen {...body} />,
    partners: <PartnersScreen {...body} />,
    gateways: <GatewaysScreen {...body} />,
    webhooks: <WebhooksScreen {...body} />,
    messages: <MessagesScreen {...body} />,
    jobs: <JobsScreen {...body} />,
  };
  return (
    <KeyContext.Provider value={router}>
      <ModeContext.Provider value={modeCtl}>
        <Box flexDirection="column" width={size.columns} height={size.rows}>
          <Header deps={props.deps} width={size.columns} />
          <Tabs screen={screen} />
          <Box height={bodyHeight} flexDirection="column" overflow="hidden">
            {help ? (
              <Help screen={screen} height={bodyHeight} width={size.columns} />
            ) : (
              <ScreenBoundary resetKey={`${screen}:${gen}`}>{screens[screen]}</ScreenBoundary>
            )}
          </Box>
          <Footer screen={screen} mode={mode} width={size.columns} />
        </Box>
      </ModeContext.Provider>
    </KeyContext.Provider>
  );
}
