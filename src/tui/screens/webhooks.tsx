import { Box, Text } from 'ink';
import { useKeys } from '../keys.js';
import { useEffect, useMemo, useRef, useState } from 'react';
import { WEBHOOK_PROVIDERS } from '../../providers/webhooks.js';
import { reprocessWebhooks } from '../../webhooks-in/reprocess.js';
import { Flash, Table, visibleRows } from '../components.js';
import { gatewayNames, webhookDetail, type TailRow } from '../data/tail.js';
import { describeEvents, eventNote } from '../data/webhook-events.js';
import { NO_FILTER, TailState, filtered, matches, verdictOf, type TailFilter } from '../data/tail-state.js';
import { useDeps, useMode, usePoll, type FlashState } from '../hooks.js';
import { useOverlay } from '../overlay.js';
import { useTheme } from '../theme.js';
import { clean, clock, fit, when } from '../text.js';

/** Names before the first read of them. */
const NO_NAMES = new Map<string, string>();

// The webhook log, live: provider webhooks in (and, toggled, delivery attempts out), newest at
// the bottom. Moving up stops following; G or End follows again. Enter opens a detail pane.

interface Line {
  key: string;
  at: number;
  id: string | null;
  /** The webhook in, whose note is read when it is on screen. */
  row?: TailRow;
  cells: string[];
}

function prettyBody(body: Buffer | null): string[] {
  if (!body || body.length === 0) return ['(no body)'];
  const text = body.toString('utf8');
  try {
    return JSON.stringify(JSON.parse(text), null, 2).split('\n');
  } catch {
    // Twilio posts a form: one field a line reads better than one long line.
    if (/^[\w.%+-]+=/.test(text) && text.includes('&'))
      return [...new URLSearchParams(text)].map(([k, v]) => `${k} = ${v}`);
    return text.split('\n');
  }
}

export function WebhooksScreen({ width, height }: { width: number; height: number }) {
  const deps = useDeps();
  const theme = useTheme();
  const { ctx } = deps;
  const tail = useRef(new TailState(ctx)).current;
  const snapshot = useRef<{ rows: TailState['rows']; attempts: TailState['attempts']; version: number } | null>(null);
  const [paused, setPaused] = useState(false);
  const [outbound, setOutbound] = useState(false);
  const [filter, setFilter] = useState<TailFilter>(NO_FILTER);
  const [sel, setSel] = useState(-1);
  const [detailId, setDetailId] = useState<string | null>(null);
  const [scroll, setScroll] = useState(0);
  const maxScroll = useRef(0);
  const [flash, setFlash] = useState<FlashState>(null);
  const poll = usePoll(
    500,
    async () => {
      await tail.poll();
      // The same object while nothing moved, so usePoll draws nothing.
      if (snapshot.current?.version !== tail.version)
        snapshot.current = { rows: tail.rows, attempts: tail.attempts, version: tail.version };
      return snapshot.current;
    },
    [outbound],
    paused,
  );
  // The attempts come through the store: read in the background, then drawn by the next read.
  const reloadRef = useRef(poll.reload);
  reloadRef.current = poll.reload;
  useEffect(() => {
    if (!outbound || paused) return;
    let stopped = false;
    let busy = false;
    const read = async () => {
      if (busy) return;
      busy = true;
      try {
        await tail.pollOutbound();
        if (!stopped) reloadRef.current();
      } catch (e) {
        if (!stopped) setFlash({ ok: false, text: deps.describeError(e) });
      } finally {
        busy = false;
      }
    };
    void read();
    const t = setInterval(() => void read(), 500);
    return () => {
      stopped = true;
      clearInterval(t);
    };
  }, [outbound, paused]);
  // Gateway names, read again when rows arrive; rows are shown with the names read for them,
  // so a row never flashes its gateway's id first.
  const rowCount = poll.data?.rows.length ?? 0;
  const named = usePoll(5000, async () => ({ rowCount, names: [...(await gatewayNames(ctx))] }), [rowCount]).data;
  const names = useMemo(() => (named ? new Map(named.names) : NO_NAMES), [named]);
  const shown = useRef<TailRow[]>([]);
  if (named?.rowCount === rowCount) shown.current = poll.data?.rows ?? [];
  const overlay = useOverlay(setFlash, () => poll.reload());
  useMode(overlay.step ? 'form' : detailId ? 'detail' : 'list');

  // The NOTE of a verified webhook (its events' types and message ids), read from its stored
  // body once, and only for rows on screen or searched: a row drawn without its note yet asks
  // for it, the notes asked for are read after the frame, and the frame is drawn again.
  const notes = useRef(new Map<string, { short: string; full: string }>()).current;
  const wanted = useRef(new Set<string>()).current;
  const [notesRead, setNotesRead] = useState(0);
  const noteOf = (r: TailRow, full = false): string => {
    if (r.verification_reason || r.error) return r.verification_reason ?? r.error ?? '';
    if (r.verification !== 'ok') return '';
    const n = notes.get(r.id);
    if (n === undefined) {
      wanted.add(r.id);
      return '';
    }
    return full ? n.full : n.short;
  };
  const readingNotes = useRef(false);
  // A read that failed (the store unreachable) is tried again on a frame two seconds later at
  // the soonest, not on the frame its own error message draws.
  const notesFailedAt = useRef(0);
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );
  useEffect(() => {
    if (readingNotes.current || wanted.size === 0 || Date.now() - notesFailedAt.current < 2000) return;
    readingNotes.current = true;
    const read = async () => {
      try {
        while (wanted.size > 0 && mounted.current) {
          const ids = [...wanted];
          wanted.clear();
          for (const id of ids) {
            const stored = await webhookDetail(ctx, id);
            notes.set(id, stored ? await eventNote(ctx, stored) : { short: '', full: '' });
          }
        }
      } catch (e) {
        notesFailedAt.current = Date.now();
        if (mounted.current) setFlash({ ok: false, text: deps.describeError(e) });
      } finally {
        readingNotes.current = false;
      }
      if (mounted.current) setNotesRead((n) => n + 1);
    };
    void read();
  });
  const lines: Line[] = useMemo(() => {
    const words = (r: TailRow) => `${r.gateway_id ? (names.get(r.gateway_id) ?? '') : ''} ${noteOf(r, true)}`;
    const inRows = shown.current.filter((r) => matches(r, filter, words));
    const out: Line[] = inRows.map((r) => ({
      key: r.id,
      at: r.received_at,
      id: r.id,
      row: r,
      cells: [
        clock(r.received_at),
        'in',
        r.provider,
        r.gateway_id ? (names.get(r.gateway_id) ?? r.gateway_id) : '-',
        verdictOf(r),
        r.processing,
        r.verification_reason ?? r.error ?? '',
      ],
    }));
    if (outbound)
      for (const a of poll.data?.attempts ?? [])
        out.push({
          key: `a${a.id}`,
          at: a.created_at,
          id: null,
          cells: [
            clock(a.created_at),
            'out',
            a.event_type ?? 'event',
            `#${a.attempt_no} ${a.duration_ms} ms`,
            a.status_code
              ? `${a.status_code >= 200 && a.status_code < 300 ? 'ok' : 'failed'} ${a.status_code}`
              : 'failed',
            '',
            a.error ? `${a.url} ${a.error}` : a.url,
          ],
        });
    return outbound ? out.sort((x, y) => x.at - y.at) : out;
  }, [poll.data, filter, outbound, names, notesRead]);

  const selected = sel >= 0 ? lines[Math.min(sel, lines.length - 1)] : undefined;
  const openFilter = () =>
    overlay.open({
      kind: 'form',
      title: 'Filter the tail',
      note: 'Applies to the latest 2,000 webhooks kept on screen.',
      fields: [
        {
          key: 'provider',
          label: 'Provider',
          type: 'choice',
          initial: filter.provider,
          options: [{ value: '', label: 'any' }, ...WEBHOOK_PROVIDERS.map((p) => ({ value: p, label: p }))],
        },
        {
          key: 'gateway',
          label: 'Gateway',
          type: 'choice',
          initial: filter.gateway,
          options: [{ value: '', label: 'any' }, ...[...names].map(([id, name]) => ({ value: id, label: name }))],
        },
        {
          key: 'text',
          label: 'Text',
          type: 'text',
          initial: filter.text,
          hint: 'in the id, path, error or events: a message id, "read"',
        },
        {
          key: 'verdict',
          label: 'Verdict',
          type: 'choice',
          initial: filter.verdict,
          options: ['', 'verified', 'bad signature', 'unroutable', 'pending', 'rejected'].map((v) => ({
            value: v,
            label: v || 'any',
          })),
        },
      ],
      submit: (v) => {
        const f = {
          provider: String(v.provider),
          gateway: String(v.gateway),
          verdict: String(v.verdict),
          text: String(v.text).trim(),
        };
        setFilter(f);
        setSel(-1);
        const parts = [
          f.provider,
          f.gateway && (names.get(f.gateway) ?? f.gateway),
          f.verdict,
          f.text && `"${f.text}"`,
        ].filter(Boolean);
        return { text: parts.length ? `Showing only ${parts.join(', ')}.` : 'Showing every webhook.' };
      },
    });

  useKeys(
    (input, key) => {
      if (overlay.isOpen()) return;
      if (detailId) {
        if (key.escape) return (setDetailId(null), setScroll(0));
        if (key.downArrow || input === 'j') return setScroll((s) => Math.min(maxScroll.current, s + 1));
        if (key.upArrow || input === 'k') return setScroll((s) => Math.max(0, Math.min(maxScroll.current, s) - 1));
        if (key.pageDown || input === ' ') return setScroll((s) => Math.min(maxScroll.current, s + 10));
        if (key.pageUp) return setScroll((s) => Math.max(0, Math.min(maxScroll.current, s) - 10));
        if (input === 'G' || key.end) return setScroll(maxScroll.current);
        if (input === 'g' || key.home) return setScroll(0);
      }
      if (input === ' ') return setPaused((p) => !p);
      if (input === '/') return openFilter();
      if (input === 'o') return (setOutbound((o) => !o), setSel(-1));
      if (key.return && selected?.id) return (setDetailId(selected.id), setScroll(0));
      if (key.return && !selected) return setFlash({ ok: true, text: 'Select a webhook with ↑ first.' });
      if (input === 'R') {
        const id = detailId ?? selected?.id;
        if (!id) return setFlash({ ok: false, text: 'Select an unroutable webhook (↑), then R.' });
        void confirmReprocess(id);
        return;
      }
      if (key.escape) return setSel(-1);
      if (input === 'G' || key.end) return setSel(-1);
      if ((input === 'g' || key.home) && lines.length) return setSel(0);
      if (key.upArrow || input === 'k') return setSel((s) => (s < 0 ? lines.length - 1 : Math.max(0, s - 1)));
      if (key.downArrow || input === 'j') return setSel((s) => (s < 0 || s >= lines.length - 1 ? -1 : s + 1));
    },
    { isActive: !overlay.step },
  );

  async function confirmReprocess(id: string): Promise<void> {
    try {
      const row = await webhookDetail(ctx, id);
      if (!row) return setFlash({ ok: false, text: `webhook ${id} is no longer in the log` });
      overlay.open({
        kind: 'confirm',
        title: `Reprocess webhook ${id}?`,
        lines: [
          `A ${row.provider} webhook received ${when(row.received_at)} UTC, now ${row.processing}${row.error ? `: ${row.error}` : ''}.`,
          'Its events are processed again from the stored body, as msgctl webhooks reprocess does;',
          'only a verified webhook that ended unroutable or in error is taken.',
        ],
        run: async () => {
          const queued = await reprocessWebhooks(ctx, { ids: [id] });
          return {
            text: `${queued.length} webhook(s) queued to be processed again; a running msgd does so within a second.`,
          };
        },
      });
    } catch (e) {
      setFlash({ ok: false, text: deps.describeError(e) });
    }
  }

  const over = overlay.element(width);
  const status = [
    paused ? 'PAUSED (Space resumes)' : sel >= 0 ? 'live, not following (G follows)' : 'live',
    outbound ? 'in + out' : 'in only (o adds deliveries out)',
    filtered(filter)
      ? `filter: ${[filter.provider, filter.gateway && (names.get(filter.gateway) ?? filter.gateway), filter.verdict, filter.text && `"${filter.text}"`].filter(Boolean).join(', ')}`
      : 'no filter (/)',
  ].join(' · ');
  // The detail takes the screen but for a few rows of the tail above it.
  const detailH = detailId ? Math.max(8, height - 7) : 0;
  const tableH = height - 2 - detailH;
  const { start, end } = visibleRows(lines.length, sel, tableH);
  // Without deliveries out, every row is "in": the DIR column leaves its room to the note.
  const cells = lines.map((l, i) => {
    const c = l.row && i >= start && i < end && !l.cells[6] ? [...l.cells.slice(0, 6), noteOf(l.row)] : l.cells;
    return outbound ? c : [c[0], ...c.slice(2)];
  });
  return (
    <Box flexDirection="column" width={width} height={height}>
      {over ?? (
        <>
          <Text wrap="truncate-end" color={paused ? theme.warn : undefined} bold={paused}>
            {status}
          </Text>
          <Table
            width={width}
            height={tableH}
            selected={sel}
            empty={
              filtered(filter)
                ? 'No webhook on screen matches the filter.'
                : 'No provider webhooks yet. They appear here as they arrive.'
            }
            columns={[
              { title: 'time', width: 8 },
              ...(outbound ? [{ title: 'dir', width: 3 }] : []),
              { title: 'provider', width: 9 },
              { title: 'gateway', width: 12 },
              { title: 'verdict', width: 13 },
              { title: 'outcome', width: 10 },
              { title: 'note', width: 0 },
            ]}
            rows={cells}
          />
          {detailId ? (
            <Detail id={detailId} width={width} height={detailH} scroll={scroll} names={names} maxScroll={maxScroll} />
          ) : null}
        </>
      )}
      <Flash
        flash={flash ?? (poll.error ? { ok: false, text: poll.error } : null)}
        position={sel >= 0 && !over ? { at: Math.min(sel, lines.length - 1), of: lines.length } : null}
      />
    </Box>
  );
}

function Detail(props: {
  id: string;
  width: number;
  height: number;
  scroll: number;
  names: Map<string, string>;
  maxScroll: { current: number };
}) {
  const deps = useDeps();
  const { ctx } = deps;
  // Read again every second: a reprocess shows its outcome here.
  const read = usePoll(
    1000,
    async () => {
      const row = await webhookDetail(ctx, props.id);
      return { id: props.id, row, events: row ? await describeEvents(ctx, row) : [] };
    },
    [props.id],
  );
  const data = read.data?.id === props.id ? read.data : null;
  if (!data) {
    const text = read.error ? `Webhook ${props.id} could not be read: ${read.error}` : `Reading webhook ${props.id}…`;
    return (
      <Box borderStyle="single" height={props.height} width={props.width} overflow="hidden">
        <Text wrap="truncate-end">{fit(clean(text), props.width - 2)}</Text>
      </Box>
    );
  }
  const r = data.row;
  if (!r) return <Text>Webhook {props.id} is no longer in the log (retention removed it).</Text>;
  let headers: Record<string, unknown> = {};
  try {
    headers = JSON.parse(r.headers);
  } catch {
    // Shown as stored below.
  }
  const lines = [
    `${r.id} · ${r.method} ${r.path}`,
    `received ${when(r.received_at)} UTC · provider ${r.provider} · gateway ${r.gateway_id ? (props.names.get(r.gateway_id) ?? r.gateway_id) : '-'}`,
    `verification: ${r.verification}${r.verification_reason ? ` (${r.verification_reason})` : ''}`,
    `what it changed: ${r.processing}${r.error ? `: ${r.error}` : ''}${r.processed_at ? ` at ${when(r.processed_at)} UTC` : ''}`,
    'EVENTS',
    ...data.events.map((l) => `  ${l}`),
    'HEADERS (secrets redacted)',
    ...Object.entries(headers).map(([k, v]) => `  ${k}: ${Array.isArray(v) ? v.join(', ') : String(v)}`),
    'BODY',
    ...prettyBody(r.body).map((l) => `  ${l}`),
  ];
  // Inside the border: the first 4 lines stay, the rest scrolls, down to its last line.
  const inside = props.height - 2;
  const scrolled = Math.max(1, inside - 4);
  props.maxScroll.current = Math.max(0, lines.length - 4 - scrolled);
  const at = Math.min(props.scroll, props.maxScroll.current);
  const shown = lines.slice(0, 4).concat(lines.slice(4 + at, 4 + at + scrolled));
  return (
    <Box flexDirection="column" borderStyle="single" height={props.height} width={props.width} overflow="hidden">
      {shown.slice(0, inside).map((l, i) => (
        <Text key={i} wrap="truncate-end" bold={/^[A-Z]+( |$)/.test(l)}>
          {fit(clean(l), props.width - 2)}
        </Text>
      ))}
    </Box>
  );
}
