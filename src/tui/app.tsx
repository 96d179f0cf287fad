import { Box, Text, useApp, useInput } from 'ink';
import { Component, useMemo, useRef, useState, type ReactNode } from 'react';
import { readHeartbeat, serverState } from '../core/counter-store.js';
import type { TuiDeps } from './deps.js';
import { DepsContext, ModeContext, usePoll, useSize, type Mode, type Size } from './hooks.js';
import { KeyContext, KeyRouter } from './keys.js';
import { GLOBAL_KEYS, SCREENS, SCREEN_KEYS, footer, type ScreenId } from './keymap.js';
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

function Header({ deps, width }: { deps: TuiDeps; width: number }) {
  const theme = useTheme();
  const hb = usePoll(1000, () => serverState(readHeartbeat(deps.ctx), deps.ctx.now()));
  const s = hb.data;
  let state: ReactNode = <Text dimColor>reading…</Text>;
  if (s?.state === 'running')
    state = (
      <Text>
        <Text color={theme.good} bold>
          ● msgd running
        </Text>{' '}
        {clean(s.hb.version)} · up {duration(deps.ctx.now() - s.hb.startedAt)} · pid {s.hb.pid}
      </Text>
    );
  else if (s?.state === 'silent')
    state = (
      <Text color={theme.bad} bold>
        ▲ msgd not responding: last beat {when(s.hb!.beatAt)} UTC
      </Text>
    );
  else if (s)
    state = (
      <Text color={theme.warn} bold>
        ○ msgd not running{s.hb ? ` (stopped ${when(s.hb.beatAt)} UTC)` : ''}
      </Text>
    );
  return (
    <Box width={width} justifyContent="space-between">
      {state}
      <Text dimColor wrap="truncate-start">
        {' '}
        {clean(deps.dataDir)}
      </Text>
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

function Help({ screen, height }: { screen: ScreenId; height: number }) {
  const rows: [string, string][] = [...SCREEN_KEYS[screen], ...GLOBAL_KEYS];
  return (
    <Box flexDirection="column" height={height} borderStyle="round" paddingX={1}>
      <Text bold>Keys ({SCREENS.find((s) => s.id === screen)!.title}) · any key closes</Text>
      {rows.slice(0, Math.max(1, height - 3)).map(([k, what]) => (
        <Text key={k + what}>
          {k.padEnd(18)} {what}
        </Text>
      ))}
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
  useInput((input, key) => {
    if (key.ctrl && input === 'c') return exit();
    if (helpRef.current) return showHelp(false);
    if (modeRef.current.mode !== 'form') {
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
  });
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
              <Help screen={screen} height={bodyHeight} />
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
