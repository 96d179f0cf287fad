import { Box, Text, useStdout } from 'ink';
import type { KeyPress } from './input.js';
import { useKeys } from './keys.js';
import { useRef, useState, type ReactNode } from 'react';
import { useTheme } from './theme.js';
import { clean, fit } from './text.js';

// The console's building blocks: a scrolling table, a form (text, masked, one-of and
// many-of fields), a confirmation naming exactly what will happen, and the one-time secret box.

export interface Column {
  title: string;
  width: number;
  align?: 'left' | 'right';
}

/** Widths that fill `total`: the flexible column (width 0) takes what the others leave. */
export function layout(columns: Column[], total: number): Column[] {
  const fixed = columns.reduce((n, c) => n + c.width, 0) + columns.length - 1;
  return columns.map((c) => (c.width === 0 ? { ...c, width: Math.max(4, total - fixed) } : c));
}

export function row(columns: Column[], cells: string[]): string {
  return columns.map((c, i) => fit(clean(cells[i] ?? ''), c.width, c.align)).join(' ');
}

/** Which rows a table of `height` lines shows: the selection stays in view; none selected, the newest (last). */
export function visibleRows(n: number, selected: number, height: number): { start: number; end: number } {
  const visible = Math.max(1, height - 1);
  const start = selected < 0 ? Math.max(0, n - visible) : Math.max(0, selected - visible + 1);
  return { start, end: Math.min(n, start + visible) };
}

/**
 * A table. Every cell goes through clean() (row()), so no screen can draw a name or a note the
 * terminal would obey. The selected row is marked with `>` as well as inverse video: a terminal
 * without attributes (TERM=dumb, NO_COLOR on some) still shows where the selection is.
 */
export function Table(props: {
  columns: Column[];
  rows: string[][];
  selected?: number;
  height: number;
  width: number;
  empty?: string;
}) {
  const theme = useTheme();
  const cols = layout(props.columns, props.width - 1);
  const sel = props.selected ?? -1;
  const { start, end } = visibleRows(props.rows.length, sel, props.height);
  const shown = props.rows.slice(start, end);
  return (
    <Box flexDirection="column" height={props.height}>
      <Text bold>
        {' '}
        {row(
          cols,
          cols.map((c) => c.title.toUpperCase()),
        )}
      </Text>
      {props.rows.length === 0 ? (
        <Text dimColor>{clean(props.empty ?? 'Nothing here.')}</Text>
      ) : (
        shown.map((cells, i) => (
          <Text key={start + i} inverse={start + i === sel} color={start + i === sel ? undefined : theme.none}>
            {start + i === sel ? '>' : ' '}
            {row(cols, cells)}
          </Text>
        ))
      )}
    </Box>
  );
}

/** Lines of a detail pane, each cleaned and cut to one line: a pane cannot forget to. */
export function Lines(props: {
  lines: string[];
  height: number;
  width?: number;
  bold?: (line: string, i: number) => boolean;
}) {
  return (
    <Box flexDirection="column" height={props.height} width={props.width} overflow="hidden">
      {props.lines.slice(0, props.height).map((l, i) => (
        <Text key={i} wrap="truncate-end" bold={props.bold?.(l, i) ?? false}>
          {clean(l) || ' '}
        </Text>
      ))}
    </Box>
  );
}

/** Keep a selection inside a list of `n` rows. */
export function moveSel(
  sel: number,
  n: number,
  input: string,
  key: { upArrow: boolean; downArrow: boolean; pageUp?: boolean; pageDown?: boolean; home?: boolean; end?: boolean },
  page = 10,
): number {
  if (n === 0) return 0;
  if (key.upArrow || input === 'k') return Math.max(0, sel - 1);
  if (key.downArrow || input === 'j') return Math.min(n - 1, sel + 1);
  if (key.pageUp) return Math.max(0, sel - page);
  if (key.pageDown) return Math.min(n - 1, sel + page);
  if (key.home || input === 'g') return 0;
  if (key.end || input === 'G') return n - 1;
  return Math.min(sel, n - 1);
}

export type Field =
  | { key: string; label: string; type: 'text' | 'secret'; initial?: string; hint?: string }
  | {
      key: string;
      label: string;
      type: 'choice';
      options: { value: string; label: string }[];
      initial?: string;
      hint?: string;
    }
  | {
      key: string;
      label: string;
      type: 'multi';
      options: { value: string; label: string }[];
      initial?: string[];
      hint?: string;
    };

export type FormValues = Record<string, string | string[]>;

function initialValues(fields: Field[]): FormValues {
  const v: FormValues = {};
  for (const f of fields) {
    if (f.type === 'multi') v[f.key] = f.initial ?? [];
    else if (f.type === 'choice') v[f.key] = f.initial ?? f.options[0]?.value ?? '';
    else v[f.key] = f.initial ?? '';
  }
  return v;
}

/**
 * A form: ↑↓/Tab between fields, typing into text fields (secret fields show only dots, and
 * their value never leaves the form's state but to the action), ←→ through choices, Space to
 * tick a many-of option, Enter to submit, Esc to cancel.
 */
export function Form(props: {
  title: string;
  fields: Field[];
  error?: string | null;
  note?: string;
  onSubmit(values: FormValues): void;
  onCancel(): void;
  width: number;
}) {
  const theme = useTheme();
  // The form's state lives in a ref: keys typed faster than React renders (a paste, a quick
  // Tab then text) each see the state the previous key left, not the last render's.
  const st = useRef({ values: initialValues(props.fields), at: 0, cursor: 0, typed: '', typedAt: 0 });
  const [, bump] = useState(0);
  const { values, at, cursor } = st.current;
  useKeys((input, key) => {
    const s = st.current;
    const n = props.fields.length;
    const field = props.fields[s.at];
    const set = (k: string, v: string | string[]) => (s.values = { ...s.values, [k]: v });
    if (key.escape) return props.onCancel();
    if (key.return) return props.onSubmit(s.values);
    if (key.tab || key.downArrow || key.upArrow) {
      s.at = key.upArrow || (key.tab && key.shift) ? (s.at + n - 1) % n : (s.at + 1) % n;
      s.cursor = 0;
      s.typed = '';
    } else if (!field) return;
    else if (field.type === 'choice') {
      const i = field.options.findIndex((o) => o.value === s.values[field.key]);
      const m = field.options.length;
      if (!key.paste && (key.leftArrow || key.rightArrow || input === ' ')) {
        const next = field.options[(i + (key.leftArrow ? m - 1 : 1)) % m];
        if (next) set(field.key, next.value);
      } else if (input && !key.ctrl && !key.meta) {
        // Type-ahead: letters typed within a second pick the first option they begin (or are in).
        const now = Date.now();
        s.typed = (now - s.typedAt < 1000 ? s.typed : '') + input.toLowerCase();
        s.typedAt = now;
        const labels = field.options.map((o) => o.label.toLowerCase());
        const hit = labels.findIndex((l) => l.startsWith(s.typed));
        const at = hit >= 0 ? hit : labels.findIndex((l) => l.includes(s.typed));
        if (at >= 0) set(field.key, field.options[at].value);
      }
    } else if (field.type === 'multi') {
      const m = field.options.length;
      if (key.leftArrow) s.cursor = (s.cursor + m - 1) % m;
      else if (key.rightArrow) s.cursor = (s.cursor + 1) % m;
      else if (input === ' ' && !key.paste) {
        const opt = field.options[s.cursor];
        const cur = s.values[field.key] as string[];
        if (opt) set(field.key, cur.includes(opt.value) ? cur.filter((x) => x !== opt.value) : [...cur, opt.value]);
      }
    } else {
      const cur = s.values[field.key] as string;
      if (key.backspace || key.delete) set(field.key, cur.slice(0, -1));
      // Typed text, or a paste as one piece of text (controls, a trailing newline among them, dropped).
      else if (input && !key.ctrl && !key.meta) set(field.key, cur + input.replace(/[\u0000-\u001f\u007f]/g, ''));
      else return;
    }
    bump((x) => x + 1);
  });
  const labelWidth = Math.min(18, Math.max(...props.fields.map((f) => f.label.length)) + 1);
  return (
    <Box flexDirection="column" borderStyle="round" paddingX={1} width={Math.min(props.width, 78)}>
      <Text bold>{clean(props.title)}</Text>
      {props.note ? <Text dimColor>{clean(props.note)}</Text> : null}
      {props.fields.map((f, i) => {
        const focused = i === at;
        const v = values[f.key];
        let shown: ReactNode;
        if (f.type === 'secret') shown = `${'•'.repeat((v as string).length)}${focused ? '▏' : ''}`;
        else if (f.type === 'text') shown = `${clean(v as string)}${focused ? '▏' : ''}`;
        else if (f.type === 'choice') shown = `‹ ${clean(f.options.find((o) => o.value === v)?.label ?? '-')} ›`;
        else if (f.type === 'multi')
          shown = f.options.map((o, j) => (
            <Text key={o.value} inverse={focused && j === cursor}>
              {(v as string[]).includes(o.value) ? '[x]' : '[ ]'} {clean(o.label)}{' '}
            </Text>
          ));
        return (
          <Box key={f.key} flexDirection="column">
            <Box>
              <Text color={focused ? theme.accent : undefined} bold={focused}>
                {focused ? '›' : ' '} {f.label.padEnd(labelWidth)}
              </Text>
              <Box flexWrap="wrap" flexShrink={1}>
                <Text>{shown}</Text>
              </Box>
            </Box>
            {focused && f.hint ? (
              <Text dimColor>
                {'  '}
                {' '.repeat(labelWidth)}
                {clean(f.hint)}
              </Text>
            ) : null}
          </Box>
        );
      })}
      {props.error ? <Text color={theme.bad}>✗ {clean(props.error)}</Text> : null}
    </Box>
  );
}

/** "What will happen", then y to do it, n or Esc to leave everything as it is. */
export function Confirm(props: { title: string; lines: string[]; onYes(): void; onNo(): void; width: number }) {
  const theme = useTheme();
  useKeys((input, key) => {
    if (input === 'y' || input === 'Y') props.onYes();
    else if (input === 'n' || input === 'N' || key.escape) props.onNo();
  });
  return (
    <Box flexDirection="column" borderStyle="double" paddingX={1} width={Math.min(props.width, 78)}>
      <Text bold color={theme.warn}>
        {clean(props.title)}
      </Text>
      {props.lines.map((l, i) => (
        <Text key={i}>{clean(l)}</Text>
      ))}
      <Text bold>y: do it · n or Esc: cancel</Text>
    </Box>
  );
}

/** OSC 52: the terminal puts `text` on the clipboard (of the machine the operator sits at, over SSH too). */
export function osc52(text: string): string {
  return `\x1b]52;c;${Buffer.from(text, 'utf8').toString('base64')}\x07`;
}

/**
 * A token's secret, once: closing the box drops it from the console's memory. `c` copies it
 * to the terminal's clipboard (OSC 52), for terminals that allow it (tmux: set-clipboard on).
 */
export function SecretBox(props: { title: string; secret: string; onClose(): void; width: number }) {
  const theme = useTheme();
  const { stdout } = useStdout();
  const [copied, setCopied] = useState(false);
  useKeys((input, key) => {
    if (key.return || key.escape) props.onClose();
    else if (input === 'c' && !key.paste) {
      stdout.write(osc52(props.secret));
      setCopied(true);
    }
  });
  return (
    <Box flexDirection="column" borderStyle="double" paddingX={1} width={Math.min(props.width, 78)}>
      <Text bold color={theme.warn}>
        {clean(props.title)}
      </Text>
      <Text>Shown ONCE: copy it now. It is not stored and cannot be shown again.</Text>
      <Text> </Text>
      <Text bold>{clean(props.secret)}</Text>
      <Text> </Text>
      {copied ? (
        <Text color={theme.good}>Sent to the terminal's clipboard (OSC 52), if the terminal allows it.</Text>
      ) : null}
      <Text dimColor>c: copy to the clipboard · Enter or Esc: I have stored it</Text>
    </Box>
  );
}

/** How many lines the flash takes at this width: one, or two for a long one (a URL to copy). */
export function flashLines(flash: { text: string } | null, width: number): number {
  return flash && flash.text.length + 2 > width ? 2 : 1;
}

/**
 * One line under a screen (two for a long message): the outcome of the last action, or its
 * error in msgctl's words, and on the right where the selection is (12/300).
 */
export function Flash(props: {
  flash: { ok: boolean; text: string } | null;
  position?: { at: number; of: number } | null;
  width?: number;
}) {
  const theme = useTheme();
  const pos = props.position && props.position.of > 0 ? `${props.position.at + 1}/${props.position.of}` : '';
  if (!props.flash && !pos) return null;
  const long = props.flash && props.width !== undefined && flashLines(props.flash, props.width) > 1;
  return (
    <Box justifyContent="space-between">
      {props.flash ? (
        <Text color={props.flash.ok ? theme.good : theme.bad} wrap={long ? 'wrap' : 'truncate-end'}>
          {props.flash.ok ? '✓ ' : '✗ '}
          {clean(props.flash.text)}
        </Text>
      ) : (
        <Text> </Text>
      )}
      {pos && !long ? <Text dimColor> {pos}</Text> : null}
    </Box>
  );
}

/**
 * `/` type-to-filter over a list: while typing, every key goes to the filter (Enter keeps it,
 * Esc clears it); afterwards Esc clears it. `handle` says whether it took the key.
 */
export function useTypeFilter(onChange: () => void) {
  const st = useRef({ text: '', typing: false });
  const [, bump] = useState(0);
  const set = (text: string, typing: boolean) => {
    st.current = { text, typing };
    bump((x) => x + 1);
    onChange();
  };
  const handle = (input: string, key: KeyPress): boolean => {
    const s = st.current;
    if (s.typing) {
      if (key.escape) set('', false);
      else if (key.return || key.downArrow || key.upArrow) set(s.text, false);
      else if (key.backspace || key.delete) set(s.text.slice(0, -1), true);
      else if (input && !key.ctrl && !key.meta) set(s.text + input.replace(/[\u0000-\u001f\u007f]/g, ''), true);
      return true;
    }
    if (input === '/' && !key.paste) {
      set(s.text, true);
      return true;
    }
    if (key.escape && s.text) {
      set('', false);
      return true;
    }
    return false;
  };
  const matches = (...fields: (string | null | undefined)[]) => {
    const t = st.current.text.trim().toLowerCase();
    return !t || fields.some((f) => (f ?? '').toLowerCase().includes(t));
  };
  return {
    text: st.current.text,
    typing: st.current.typing,
    active: st.current.typing || st.current.text !== '',
    handle,
    matches,
  };
}

/** The filter's line over a list while it is typed or in force. */
export function FilterLine(props: { filter: { text: string; typing: boolean }; shown: number; of: number }) {
  const theme = useTheme();
  return (
    <Text wrap="truncate-end" color={props.filter.typing ? theme.accent : undefined}>
      / {clean(props.filter.text)}
      {props.filter.typing ? '▏' : ''} · {props.shown} of {props.of}
      {props.filter.typing ? ' · Enter keeps · Esc clears' : ' · / changes · Esc clears'}
    </Text>
  );
}
