import { Box, Text } from 'ink';
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

export function Table(props: {
  columns: Column[];
  rows: string[][];
  selected?: number;
  height: number;
  width: number;
  empty?: string;
}) {
  const theme = useTheme();
  const cols = layout(props.columns, props.width);
  const visible = Math.max(1, props.height - 1);
  const sel = props.selected ?? -1;
  // No selection: a tail, showing the newest (last) rows. Otherwise the selection stays in view.
  const start = sel < 0 ? Math.max(0, props.rows.length - visible) : Math.max(0, sel - visible + 1);
  const shown = props.rows.slice(start, start + visible);
  return (
    <Box flexDirection="column" height={props.height}>
      <Text bold>
        {row(
          cols,
          cols.map((c) => c.title.toUpperCase()),
        )}
      </Text>
      {props.rows.length === 0 ? (
        <Text dimColor>{props.empty ?? 'Nothing here.'}</Text>
      ) : (
        shown.map((cells, i) => (
          <Text key={start + i} inverse={start + i === sel} color={start + i === sel ? undefined : theme.none}>
            {row(cols, cells)}
          </Text>
        ))
      )}
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
  const st = useRef({ values: initialValues(props.fields), at: 0, cursor: 0 });
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
    } else if (!field) return;
    else if (field.type === 'choice') {
      const i = field.options.findIndex((o) => o.value === s.values[field.key]);
      const m = field.options.length;
      if (key.leftArrow || key.rightArrow || input === ' ') {
        const next = field.options[(i + (key.leftArrow ? m - 1 : 1)) % m];
        if (next) set(field.key, next.value);
      }
    } else if (field.type === 'multi') {
      const m = field.options.length;
      if (key.leftArrow) s.cursor = (s.cursor + m - 1) % m;
      else if (key.rightArrow) s.cursor = (s.cursor + 1) % m;
      else if (input === ' ') {
        const opt = field.options[s.cursor];
        const cur = s.values[field.key] as string[];
        if (opt) set(field.key, cur.includes(opt.value) ? cur.filter((x) => x !== opt.value) : [...cur, opt.value]);
      }
    } else {
      const cur = s.values[field.key] as string;
      if (key.backspace || key.delete) set(field.key, cur.slice(0, -1));
      else if (input && !key.ctrl && !key.meta) set(field.key, cur + input.replace(/[\r\n]/g, ''));
      else return;
    }
    bump((x) => x + 1);
  });
  const labelWidth = Math.min(18, Math.max(...props.fields.map((f) => f.label.length)) + 1);
  return (
    <Box flexDirection="column" borderStyle="round" paddingX={1} width={Math.min(props.width, 78)}>
      <Text bold>{props.title}</Text>
      {props.note ? <Text dimColor>{props.note}</Text> : null}
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
              {(v as string[]).includes(o.value) ? '[x]' : '[ ]'} {o.label}{' '}
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
                {f.hint}
              </Text>
            ) : null}
          </Box>
        );
      })}
      {props.error ? <Text color={theme.bad}>✗ {props.error}</Text> : null}
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
        {props.title}
      </Text>
      {props.lines.map((l, i) => (
        <Text key={i}>{clean(l)}</Text>
      ))}
      <Text bold>y: do it · n or Esc: cancel</Text>
    </Box>
  );
}

/** A token's secret, once: closing the box drops it from the console's memory. */
export function SecretBox(props: { title: string; secret: string; onClose(): void; width: number }) {
  const theme = useTheme();
  useKeys((_input, key) => {
    if (key.return || key.escape) props.onClose();
  });
  return (
    <Box flexDirection="column" borderStyle="double" paddingX={1} width={Math.min(props.width, 78)}>
      <Text bold color={theme.warn}>
        {props.title}
      </Text>
      <Text>Shown ONCE: copy it now. It is not stored and cannot be shown again.</Text>
      <Text> </Text>
      <Text bold>{props.secret}</Text>
      <Text> </Text>
      <Text dimColor>Enter or Esc: I have stored it</Text>
    </Box>
  );
}

/** One line under a screen: the outcome of the last action, or its error in msgctl's words. */
export function Flash(props: { flash: { ok: boolean; text: string } | null }) {
  const theme = useTheme();
  if (!props.flash) return null;
  return (
    <Text color={props.flash.ok ? theme.good : theme.bad} wrap="truncate-end">
      {props.flash.ok ? '✓ ' : '✗ '}
      {clean(props.flash.text)}
    </Text>
  );
}
