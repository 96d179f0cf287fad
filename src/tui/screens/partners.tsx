import { Box, Text } from 'ink';
import { useKeys } from '../keys.js';
import { useMemo, useState } from 'react';
import { addFallback, assignChannel, FAILOVER_TYPES, routeOrderIn, unassignChannel } from '../../core/channels.js';
import { CHANNEL_TYPES } from '../../core/context.js';
import { listGateways } from '../../core/gateways.js';
import { adjust, topup } from '../../core/ledger.js';
import {
  activatePartner,
  createPartner,
  getPartner,
  setCreditLimit,
  suspendPartner,
  type Partner,
} from '../../core/partners.js';
import { SCOPES, issueToken, revokeToken } from '../../core/tokens.js';
import { parseMoney } from '../../lib/money.js';
import { FilterLine, Flash, Lines, Table, moveSel, useTypeFilter, type FormValues } from '../components.js';
import {
  SpendToday,
  readLedgerPage,
  readPartnerDetail,
  readPartners,
  type LedgerPage,
  type PartnerDetail,
} from '../data/partners.js';
import { useDeps, useMode, usePoll, type FlashState } from '../hooks.js';
import { useOverlay, type Step } from '../overlay.js';
import { clean, fit, money, when } from '../text.js';

// Partners: the list with money at a glance, a partner's detail, and every action msgctl's
// partner, balance, token and channel commands have, through the same core functions.

const str = (v: FormValues[string] | undefined) => (typeof v === 'string' ? v.trim() : '');

export function PartnersScreen({ width, height }: { width: number; height: number }) {
  const deps = useDeps();
  const { ctx, actor } = deps;
  const spend = useMemo(() => new SpendToday(ctx), [ctx]);
  const [sel, setSel] = useState(0);
  const [view, setView] = useState<'list' | 'detail' | 'ledger'>('list');
  const [flash, setFlash] = useState<FlashState>(null);
  const filter = useTypeFilter(() => setSel(0));
  const list = usePoll(2000, () => readPartners(ctx, spend));
  const all = list.data ?? [];
  const rows = filter.active ? all.filter((r) => filter.matches(r.slug, r.name, r.id)) : all;
  const current: Partner | undefined = rows[Math.min(sel, rows.length - 1)];
  const detail = usePoll(
    2000,
    async () => (view === 'detail' && current ? await readPartnerDetail(ctx, current.id) : null),
    [view, current?.id],
  );
  // The whole ledger, a page at a time, newest first: the ids where each page shown began.
  const [pages, setPages] = useState<number[]>([]);
  const ledgerRows = height - 4;
  const ledger = usePoll(
    2000,
    () => (view === 'ledger' && current ? readLedgerPage(ctx, current.id, pages[pages.length - 1], ledgerRows) : null),
    [view, current?.id, pages.join(',')],
  );
  const overlay = useOverlay(setFlash, () => {
    list.reload();
    detail.reload();
  });
  useMode(overlay.step || filter.typing ? 'form' : view === 'list' ? 'list' : 'detail');

  const p = () => getPartner(ctx, current!.id);
  const steps: Record<string, () => Step | Promise<Step>> = {
    n: () => ({
      kind: 'form',
      title: 'New partner',
      fields: [
        { key: 'slug', label: 'Slug', type: 'text', hint: 'lowercase letters, digits, dashes: acme' },
        { key: 'name', label: 'Name', type: 'text' },
        { key: 'currency', label: 'Currency', type: 'text', initial: 'USD' },
        {
          key: 'credit',
          label: 'Credit limit',
          type: 'text',
          initial: '0',
          hint: 'how far the balance may go below zero',
        },
      ],
      submit: async (v) => {
        const created = await createPartner(
          ctx,
          {
            slug: str(v.slug),
            name: str(v.name),
            currency: str(v.currency) || undefined,
            creditLimit: parseMoney(str(v.credit) || '0'),
          },
          actor,
        );
        return { text: `Created partner ${created.slug} (${created.id}).` };
      },
    }),
    t: async () => {
      const shown = await p();
      return {
        kind: 'form',
        title: `Top up ${shown.slug}`,
        fields: [
          { key: 'amount', label: 'Amount', type: 'text', hint: `decimal, in ${shown.currency}: 100.00` },
          { key: 'note', label: 'Note', type: 'text', hint: 'why, e.g. the invoice number' },
        ],
        submit: async (v) => {
          const partner = await p();
          const amount = parseMoney(str(v.amount));
          const note = str(v.note) || null;
          return {
            kind: 'confirm',
            title: `Top up ${partner.slug}?`,
            lines: [
              `Adds ${money(amount, partner.currency)} to ${partner.slug} (${partner.name}), recorded in its ledger${note ? ` with the note "${note}"` : ''}.`,
              `Balance ${money(partner.balance, partner.currency)} → ${money(partner.balance + amount, partner.currency)}.`,
            ],
            run: async () => {
              const e = await topup(ctx, partner.id, amount, note, actor);
              const after = await getPartner(ctx, partner.id);
              return {
                text: `Topped up ${after.slug} by ${money(e.amount, after.currency)}; balance ${money(after.balance, after.currency)}.`,
              };
            },
          };
        },
      };
    },
    a: async () => {
      const shown = await p();
      return {
        kind: 'form',
        title: `Adjust the balance of ${shown.slug}`,
        fields: [
          { key: 'amount', label: 'Amount', type: 'text', hint: 'signed: -5.00 takes money off, 5.00 adds' },
          { key: 'note', label: 'Note', type: 'text', hint: 'required: why the correction is made' },
        ],
        submit: async (v) => {
          const partner = await p();
          const amount = parseMoney(str(v.amount));
          const note = str(v.note);
          return {
            kind: 'confirm',
            title: `Adjust ${partner.slug}?`,
            lines: [
              `${amount < 0 ? 'Takes' : 'Adds'} ${money(Math.abs(amount), partner.currency)} ${amount < 0 ? 'off' : 'to'} ${partner.slug}'s balance, noted "${note}".`,
              `Balance ${money(partner.balance, partner.currency)} → ${money(partner.balance + amount, partner.currency)}.`,
            ],
            run: async () => {
              const e = await adjust(ctx, partner.id, amount, note, actor);
              const after = await getPartner(ctx, partner.id);
              return {
                text: `Adjusted ${after.slug} by ${money(e.amount, after.currency)} (${note}); balance ${money(after.balance, after.currency)}.`,
              };
            },
          };
        },
      };
    },
    c: async () => {
      const shown = await p();
      return {
        kind: 'form',
        title: `Credit limit of ${shown.slug}`,
        fields: [
          {
            key: 'amount',
            label: 'Credit limit',
            type: 'text',
            initial: money(shown.credit_limit),
            hint: 'how far below zero; 0 for prepaid only',
          },
        ],
        submit: async (v) => {
          const partner = await p();
          const amount = parseMoney(str(v.amount));
          return {
            kind: 'confirm',
            title: `Set the credit limit of ${partner.slug}?`,
            lines: [
              `Credit limit ${money(partner.credit_limit, partner.currency)} → ${money(amount, partner.currency)}.`,
              `It may then spend down to ${money(-amount, partner.currency)} (available ${money(partner.balance + amount, partner.currency)}).`,
            ],
            run: async () => {
              const after = await setCreditLimit(ctx, partner.id, amount, actor);
              return { text: `Credit limit of ${after.slug} is now ${money(after.credit_limit, after.currency)}.` };
            },
          };
        },
      };
    },
    s: async () => {
      const partner = await p();
      const suspend = partner.status === 'active';
      return {
        kind: 'confirm',
        title: `${suspend ? 'Suspend' : 'Activate'} ${partner.slug}?`,
        lines: suspend
          ? [
              `Every API request with ${partner.slug}'s tokens is refused (403) from the next request on.`,
              'Queued messages still go out.',
            ]
          : [`${partner.slug}'s tokens work again from the next request on.`],
        run: async () => {
          const after = await (suspend
            ? suspendPartner(ctx, partner.id, actor)
            : activatePartner(ctx, partner.id, actor));
          return { text: `${suspend ? 'Suspended' : 'Activated'} ${after.slug}.` };
        },
      };
    },
    i: async () => {
      const shown = await p();
      return {
        kind: 'form',
        title: `Issue a token for ${shown.slug}`,
        fields: [
          { key: 'name', label: 'Name', type: 'text', hint: 'what it is for: prod' },
          {
            key: 'scopes',
            label: 'Scopes',
            type: 'multi',
            options: [...SCOPES.map((s) => ({ value: s, label: s })), { value: '*', label: '* (all)' }],
            initial: ['messages:send'],
            hint: '←→ move, Space tick',
          },
          { key: 'expires', label: 'Expires', type: 'text', hint: 'empty: never; 2027-01-31, or 30d, 12h, 2w' },
        ],
        submit: async (v) => {
          const partner = await p();
          const expires = str(v.expires);
          const { token, secret } = await issueToken(
            ctx,
            {
              partner: partner.id,
              name: str(v.name),
              scopes: v.scopes as string[],
              expiresAt: expires ? deps.parseExpiry(expires, ctx.now()) : null,
            },
            actor,
          );
          return {
            text: `Issued token "${token.name}" (${token.prefix}…) for ${partner.slug}.`,
            secret: { title: `Token "${token.name}" for ${partner.slug}: its secret`, value: secret },
          };
        },
      };
    },
    r: async () => {
      const d = await readPartnerDetail(ctx, current!.id);
      const active = d.tokens.filter((t) => t.state === 'active');
      if (active.length === 0) throw new Error(`${d.partner.slug} has no active token to revoke`);
      return {
        kind: 'form',
        title: `Revoke a token of ${d.partner.slug}`,
        fields: [
          {
            key: 'token',
            label: 'Token',
            type: 'choice',
            options: active.map((t) => ({ value: t.id, label: `${t.name} (${t.prefix}…, ${t.scopes.join(',')})` })),
            hint: '←→ choose',
          },
        ],
        submit: (v) => {
          const t = active.find((x) => x.id === v.token)!;
          return {
            kind: 'confirm',
            title: `Revoke token "${t.name}" of ${d.partner.slug}?`,
            lines: [`Token ${t.prefix}… (${t.id}) is refused from the next request on. This cannot be undone.`],
            run: async () => {
              const r = await revokeToken(ctx, t.id, actor);
              return { text: `Revoked token "${r.name}" (${r.id}): requests with it are refused from now on.` };
            },
          };
        },
      };
    },
    A: async () => {
      const partner = await p();
      const gws = await listGateways(ctx);
      if (gws.length === 0) throw new Error('no gateways yet: add one on the Gateways screen (3)');
      // The order each SMS/email channel has now, so a fallback is added knowing where it goes.
      const orders = (
        await Promise.all(
          FAILOVER_TYPES.map(async (t) => {
            const order = await routeOrderIn(ctx.store, partner.id, t);
            return order.length ? `${t}: ${order.map((c) => clean(c.gateway_name)).join(' → ')}` : null;
          }),
        )
      ).filter(Boolean);
      return {
        kind: 'form',
        title: `Assign a channel to ${partner.slug}${orders.length ? ` (order now: ${orders.join(' · ')})` : ''}`,
        fields: [
          {
            key: 'type',
            label: 'Channel',
            type: 'choice',
            options: CHANNEL_TYPES.map((c) => ({ value: c, label: c })),
            hint: '←→ choose',
          },
          {
            key: 'gateway',
            label: 'Gateway',
            type: 'choice',
            options: gws.map((g) => ({
              value: g.id,
              label: `${g.name} (${g.kind}: ${ctx.gatewayKinds.get(g.kind).channels.join(', ')})`,
            })),
            hint: '←→ choose',
          },
          {
            key: 'place',
            label: 'Place',
            type: 'choice',
            options: [
              { value: 'primary', label: 'primary (sends first)' },
              { value: 'fallback', label: 'fallback (SMS, email: after the gateways already there)' },
            ],
            hint: '←→ choose',
          },
          {
            key: 'sender',
            label: 'Sender',
            type: 'text',
            hint: "E.164 number, page id, Instagram id or from-address (a fallback: empty takes the primary's)",
          },
        ],
        submit: async (v) => {
          const input = {
            partner: partner.id,
            gateway: str(v.gateway),
            type: str(v.type),
            sender: str(v.sender) || undefined,
          };
          if (str(v.place) === 'fallback') {
            const f = await addFallback(ctx, input, actor);
            const order = (await routeOrderIn(ctx.store, partner.id, f.type)).map((c) => c.gateway_name);
            return { text: `Added fallback ${f.position} to ${partner.slug}'s ${f.type}: ${order.join(' → ')}.` };
          }
          const c = await assignChannel(ctx, input, actor);
          return { text: `Assigned ${c.type} to ${partner.slug} (sender ${c.sender}).` };
        },
      };
    },
    u: async () => {
      const d = await readPartnerDetail(ctx, current!.id);
      if (d.channels.length === 0) throw new Error(`${d.partner.slug} has no channel to unassign`);
      return {
        kind: 'form',
        title: `Unassign a channel of ${d.partner.slug}`,
        fields: [
          {
            key: 'channel',
            label: 'Channel',
            type: 'choice',
            options: d.channels.map((c) => ({ value: c.id, label: `${c.type} ${c.sender} via ${c.gateway_name}` })),
            hint: '←→ choose',
          },
        ],
        submit: (v) => {
          const c = d.channels.find((x) => x.id === v.channel)!;
          return {
            kind: 'confirm',
            title: `Unassign ${c.type} from ${d.partner.slug}?`,
            lines: [
              `${d.partner.slug}'s ${c.type} sends (from ${c.sender} via ${c.gateway_name}) are refused (403) from the next request on.`,
            ],
            run: async () => {
              const u = await unassignChannel(ctx, { channel: c.id }, actor);
              return { text: `Unassigned ${u.type} (${u.sender}) from ${d.partner.slug}.` };
            },
          };
        },
      };
    },
  };

  useKeys(
    (input, key) => {
      if (overlay.isOpen()) return;
      if (view === 'ledger') {
        const l = ledger.data;
        if (key.escape) return (setView('detail'), setPages([]));
        if ((key.pageDown || input === ' ' || input === 'j' || key.downArrow) && l?.next)
          return setPages((p) => [...p, l.next!]);
        if ((key.pageUp || input === 'k' || key.upArrow) && pages.length) return setPages((p) => p.slice(0, -1));
        if (input === 'g' || key.home) return setPages([]);
        return;
      }
      if (view === 'list' && filter.handle(input, key)) return;
      if (key.escape) return setView('list');
      if (key.return && current) return setView('detail');
      if (input === 'L' && view === 'detail' && current) return (setPages([]), setView('ledger'));
      const step = steps[input];
      if (step && (input === 'n' || current)) return overlay.openFrom(step);
      setSel((s) => moveSel(s, rows.length, input, key));
    },
    { isActive: !overlay.step },
  );

  const over = overlay.element(width);
  const listHeight = height - 1;
  return (
    <Box flexDirection="column" width={width} height={height}>
      {over ? (
        over
      ) : view === 'ledger' && ledger.data && ledger.data.before === pages[pages.length - 1] ? (
        <LedgerPages page={ledger.data} pageNo={pages.length + 1} width={width} height={listHeight} />
      ) : view === 'detail' && detail.data ? (
        <Detail d={detail.data} width={width} height={listHeight} rateDefault={ctx.config.rateLimit.perMinute} />
      ) : (
        <>
          {filter.active ? <FilterLine filter={filter} shown={rows.length} of={all.length} /> : null}
          <Table
            width={width}
            height={listHeight - (filter.active ? 1 : 0)}
            selected={sel}
            empty={filter.active ? 'No partner matches the filter (Esc clears it).' : 'No partners yet: n creates one.'}
            columns={[
              { title: 'slug', width: 14 },
              { title: 'name', width: 0 },
              { title: 'status', width: 9 },
              { title: 'balance', width: 14, align: 'right' },
              { title: 'credit', width: 10, align: 'right' },
              { title: 'spent today', width: 11, align: 'right' },
            ]}
            rows={rows.map((r) => [
              r.slug,
              r.name,
              r.status,
              money(r.balance, r.currency),
              money(r.credit_limit),
              money(r.spendToday),
            ])}
          />
        </>
      )}
      <Flash
        flash={flash ?? (list.error ? { ok: false, text: list.error } : null)}
        position={view === 'list' && !over ? { at: Math.min(sel, rows.length - 1), of: rows.length } : null}
      />
    </Box>
  );
}

function Detail({
  d,
  width,
  height,
  rateDefault,
}: {
  d: PartnerDetail;
  width: number;
  height: number;
  rateDefault: number;
}) {
  const p = d.partner;
  const lines: string[] = [
    `${p.slug} · ${p.name} · ${p.status} · ${p.id}`,
    `balance ${money(p.balance, p.currency)} · credit ${money(p.credit_limit, p.currency)} · available ${money(p.balance + p.credit_limit, p.currency)}`,
    `rate limit ${p.rate_limit_per_minute ?? `${rateDefault} (default)`}/min · low-balance threshold ${
      p.low_balance_threshold === null ? 'the default' : money(p.low_balance_threshold, p.currency)
    }`,
    'CHANNELS',
    ...(d.channels.length
      ? d.channels.map(
          (c) =>
            `  ${fit(c.type, 10)} ${fit(c.position === 0 ? 'primary' : `fallback ${c.position}`, 10)} ${fit(clean(c.sender), 22)} via ${clean(c.gateway_name)} (${c.gateway_kind}${c.gateway_status === 'disabled' ? ', disabled' : ''})`,
        )
      : ['  none: A assigns one']),
    'TOKENS',
    ...(d.tokens.length
      ? d.tokens.map(
          (t) =>
            `  ${fit(clean(t.name), 12)} ${fit(t.prefix + '…', 18)} ${fit(t.state, 8)} used ${fit(t.last_used_at ? t.last_used_at.slice(0, 16).replace('T', ' ') : 'never', 16)} ${t.scopes.join(',')}`,
        )
      : ['  none: i issues one']),
    'PRICES',
    ...(d.prices.length
      ? [`  ${d.prices.map((x) => `${x.channel_type} ${money(x.amount)}${x.partner_id ? ' (own)' : ''}`).join(' · ')}`]
      : ['  none set: every send is free']),
    'RECENT LEDGER (L: all of it, by pages)',
    ...(d.ledger.length
      ? d.ledger.map(
          (e) =>
            `  ${when(e.created_at)} ${fit(e.kind, 10)} ${fit(money(e.amount), 12, 'right')} → ${fit(money(e.balance_after), 12, 'right')} ${clean(e.note ?? e.message_id ?? '')}`,
        )
      : ['  no entries: t tops up']),
  ];
  return <Lines lines={lines} height={height} width={width} bold={(l, i) => i === 0 || /^[A-Z ]+( \(|$)/.test(l)} />;
}

function LedgerPages({
  page,
  pageNo,
  width,
  height,
}: {
  page: LedgerPage;
  pageNo: number;
  width: number;
  height: number;
}) {
  const p = page.partner;
  return (
    <Box flexDirection="column" width={width} height={height}>
      <Text bold wrap="truncate-end">
        {clean(`Ledger of ${p.slug} (${p.currency}) · page ${pageNo} · newest first`)}
      </Text>
      <Table
        width={width}
        height={height - 2}
        columns={[
          { title: 'time (utc)', width: 19 },
          { title: 'kind', width: 10 },
          { title: 'amount', width: 12, align: 'right' },
          { title: 'balance', width: 12, align: 'right' },
          { title: 'note / message', width: 0 },
        ]}
        rows={page.entries.map((e) => [
          when(e.created_at),
          e.kind,
          money(e.amount),
          money(e.balance_after),
          e.note ?? e.message_id ?? '',
        ])}
        empty="No ledger entries."
      />
      <Text dimColor wrap="truncate-end">
        {page.next ? 'PgDn/j: older · ' : 'the oldest entry · '}
        {pageNo > 1 ? 'PgUp/k: newer · g: newest · ' : ''}Esc: back to the partner
      </Text>
    </Box>
  );
}
