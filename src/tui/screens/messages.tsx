import { Box } from 'ink';
import { useKeys } from '../keys.js';
import { useState } from 'react';
import { Flash, Lines, Table, moveSel } from '../components.js';
import { FIND_LIMIT, STATUS_SCAN, findMessages, messageWithHistory, type MessageQuery } from '../data/messages.js';
import { useDeps, useMode, usePoll, type FlashState } from '../hooks.js';
import { useOverlay } from '../overlay.js';
import { clean, fit, money, when } from '../text.js';

// Messages: find by id, partner, recipient or status (the newest first), and a message's
// status history, as msgctl messages list / show give them.

export function MessagesScreen({ width, height }: { width: number; height: number }) {
  const deps = useDeps();
  const { ctx } = deps;
  const [query, setQuery] = useState<MessageQuery>({});
  const [sel, setSel] = useState(0);
  const [open, setOpen] = useState<string | null>(null);
  const [flash, setFlash] = useState<FlashState>(null);
  const found = usePoll(5000, () => findMessages(ctx, query), [JSON.stringify(query)]);
  const detail = usePoll(2000, () => (open ? messageWithHistory(ctx, open) : null), [open]);
  const rows = found.data ?? [];
  const overlay = useOverlay(setFlash, () => {});
  useMode(overlay.step ? 'form' : open ? 'detail' : 'list');

  useKeys(
    (input, key) => {
      if (overlay.isOpen()) return;
      if (open) {
        if (key.escape) setOpen(null);
        return;
      }
      if (input === '/')
        return overlay.open({
          kind: 'form',
          title: 'Find messages',
          note: `Fill any; the newest ${FIND_LIMIT} matches. A status alone looks among the newest ${STATUS_SCAN.toLocaleString('en-US')}.`,
          fields: [
            { key: 'id', label: 'Message id', type: 'text', initial: query.id, hint: 'msg_…' },
            { key: 'partner', label: 'Partner', type: 'text', initial: query.partner, hint: 'slug or id' },
            {
              key: 'recipient',
              label: 'Recipient',
              type: 'text',
              initial: query.recipient,
              hint: '+14155550123, an email, a page-scoped id',
            },
            {
              key: 'status',
              label: 'Status',
              type: 'text',
              initial: query.status,
              hint: 'scheduled, queued, sent, delivered, failed, canceled, …',
            },
          ],
          submit: async (v) => {
            const q: MessageQuery = {
              id: String(v.id),
              partner: String(v.partner),
              recipient: String(v.recipient),
              status: String(v.status),
            };
            const n = (await findMessages(ctx, q)).length;
            setQuery(q);
            setSel(0);
            return { text: `${n} message(s) found.` };
          },
        });
      if (key.return && rows[sel]) return setOpen(rows[sel].id);
      setSel((s) => moveSel(s, rows.length, input, key));
    },
    { isActive: !overlay.step },
  );

  const over = overlay.element(width);
  const d = detail.data;
  return (
    <Box flexDirection="column" width={width} height={height}>
      {over ??
        (open && d ? (
          <Lines
            height={height - 1}
            lines={[
              `${d.m.id} · ${d.m.direction} ${d.m.channel_type} · partner ${d.m.partner_id}`,
              `from ${clean(d.m.from)} to ${clean(d.m.to)}`,
              `status ${d.m.status} · price ${money(d.m.price)}${d.m.refunded ? ' (refunded)' : ''} · provider id ${clean(d.m.provider_message_id) || '-'}`,
              d.m.send_at !== null ? `scheduled for ${when(d.m.send_at)}` : '',
              d.m.status === 'scheduled' ? `cancel before then: msgctl messages cancel ${d.m.id}` : '',
              d.m.error_code ? `error ${clean(d.m.error_code)}: ${clean(d.m.error_message)}` : 'no error',
              d.m.dispatch_uncertain ? 'possible duplicate: an attempt may have reached the provider unseen' : '',
              'HISTORY',
              ...d.history.map(
                (h) =>
                  `  ${when(h.occurred_at)}  ${fit(h.status, 11)} ${fit(clean(h.provider_status) || '-', 14)} ${h.ignored ? 'not applied (late/duplicate)' : 'applied'}${h.error_code ? `  ${clean(h.error_code)}: ${clean(h.error_message)}` : ''}`,
              ),
            ].filter((l) => l !== '')}
            bold={(l, i) => i === 0 || l === 'HISTORY'}
          />
        ) : (
          <Table
            width={width}
            height={height - 1}
            selected={sel}
            empty="No messages match. / finds by id, partner, recipient or status."
            columns={[
              { title: 'id', width: 30 },
              { title: 'created (utc)', width: 16 },
              { title: 'chan', width: 8 },
              { title: 'to', width: 0 },
              { title: 'status', width: 9 },
            ]}
            rows={rows.map((m) => [
              m.id,
              when(m.created_at).slice(0, 16),
              m.channel_type,
              m.direction === 'inbound' ? `(in) ${m.from}` : m.to,
              m.status,
            ])}
          />
        ))}
      <Flash
        flash={flash ?? (found.error ? { ok: false, text: found.error } : null)}
        position={!over && !open ? { at: Math.min(sel, rows.length - 1), of: rows.length } : null}
      />
    </Box>
  );
}
