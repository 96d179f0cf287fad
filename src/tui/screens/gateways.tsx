import { Box, Text } from 'ink';
import { useKeys } from '../keys.js';
import { useRef, useState } from 'react';
import { listChannels } from '../../core/channels.js';
import { CHANNEL_TYPES, type CoreCtx, type GatewayKind } from '../../core/context.js';
import { COUNTER_NAMES } from '../../core/counters.js';
import { readCounterWindows } from '../../core/counter-store.js';
import { circuitText, readCircuits, type Circuit } from '../../core/circuits.js';
import { addGateway, getGateway, listGateways, updateGateway, type GatewayView } from '../../core/gateways.js';
import { getPartner, listPartners } from '../../core/partners.js';
import { listPrices, setPrice, unsetPrice, type PriceListRow } from '../../core/prices.js';
import { templateSync } from '../../core/whatsapp-templates.js';
import { syncGatewayTemplatesOnce } from '../../jobs/template-sync.js';
import { parseMoney } from '../../lib/money.js';
import {
  FilterLine,
  Flash,
  Table,
  flashLines,
  moveSel,
  useTypeFilter,
  type Field,
  type FormValues,
} from '../components.js';
import { useDeps, useMode, usePoll, type FlashState } from '../hooks.js';
import { useOverlay, type Step } from '../overlay.js';
import { clean, money, when } from '../text.js';

// Gateways: provider accounts with their health (errors of the last hour by provider code, from
// msgd's counters) and the webhook URL to register. Secrets are typed into masked fields, go
// straight to the same core function as msgctl gateway add/update, and are never shown again.

interface Row {
  g: GatewayView;
  rate: string;
  channels: number;
  errors: { code: string; n: number }[];
  /** Its circuit breaker as msgd last published it; undefined: closed, never failed. */
  circuit: Circuit | undefined;
  /** Messages moved from it to a fallback in the last hour. */
  movedOn: number;
  /** WhatsApp Cloud: how many templates were read, when, or why not. */
  templates: string | null;
}

async function templatesLine(ctx: ReturnType<typeof useDeps>['ctx'], g: GatewayView): Promise<string | null> {
  if (g.kind !== 'whatsapp_cloud') return null;
  const s = await templateSync(ctx, g.id);
  if (!s?.synced_at)
    return `never read${g.settings.waba_id ? '' : ' (no waba_id)'}${s?.error ? `: ${s.error}` : ''} (t reads)`;
  return `${s.templates}, read ${when(s.synced_at).slice(0, 16)}${s.error ? `; last try failed: ${s.error}` : ''} (t reads)`;
}

async function readRows(ctx: ReturnType<typeof useDeps>['ctx']): Promise<Row[]> {
  const counts = new Map<string, number>();
  for (const c of await listChannels(ctx)) counts.set(c.gateway_id, (counts.get(c.gateway_id) ?? 0) + 1);
  const errors = new Map<string, { code: string; n: number }[]>();
  for (const w of await readCounterWindows(ctx, ctx.now()))
    if (w.name === COUNTER_NAMES.dispatchErrors && w.lastHour > 0) {
      const list = errors.get(w.labels.gateway) ?? [];
      list.push({ code: w.labels.code, n: w.lastHour });
      errors.set(w.labels.gateway, list);
    }
  const movedOn = new Map<string, number>();
  for (const w of await readCounterWindows(ctx, ctx.now()))
    if (w.name === COUNTER_NAMES.failovers && w.lastHour > 0)
      movedOn.set(w.labels.gateway, (movedOn.get(w.labels.gateway) ?? 0) + w.lastHour);
  const circuits = await readCircuits(ctx);
  const rows: Row[] = [];
  for (const g of await listGateways(ctx)) {
    const own = g.settings.rate_per_second;
    rows.push({
      g,
      rate: own === undefined ? `${ctx.config.dispatch.ratePerSecond[g.kind]} default` : String(own),
      channels: counts.get(g.id) ?? 0,
      errors: (errors.get(g.id) ?? []).sort((a, b) => b.n - a.n),
      circuit: circuits.get(g.id),
      movedOn: movedOn.get(g.id) ?? 0,
      templates: await templatesLine(ctx, g),
    });
  }
  return rows;
}

const str = (v: FormValues[string] | undefined) => (typeof v === 'string' ? v.trim() : '');

function settingFields(ctx: CoreCtx, kind: GatewayKind, current?: Record<string, unknown>): Field[] {
  return Object.keys(ctx.gatewayKinds.get(kind).settings.shape).map((k) => ({
    key: `set:${k}`,
    label: k,
    type: 'text' as const,
    initial:
      current?.[k] === undefined
        ? ''
        : typeof current[k] === 'string'
          ? (current[k] as string)
          : JSON.stringify(current[k]),
    hint: current ? 'empty: back to its default' : 'empty: its default, if it has one',
  }));
}

function secretFields(ctx: CoreCtx, kind: GatewayKind, editing: boolean): Field[] {
  const spec = ctx.gatewayKinds.get(kind).secrets;
  return [...spec.required.map((s) => [s, true] as const), ...spec.optional.map((s) => [s, false] as const)].map(
    ([s, req]) => ({
      key: `secret:${s}`,
      label: `${s}${req && !editing ? ' *' : ''}`,
      type: 'secret' as const,
      hint: editing ? 'masked; empty keeps the stored one' : req ? 'masked; required' : 'masked; optional',
    }),
  );
}

function split(values: FormValues) {
  const settings: Record<string, string> = {};
  const secrets: Record<string, string> = {};
  const cleared: string[] = [];
  for (const [k, raw] of Object.entries(values)) {
    const v = typeof raw === 'string' ? raw : '';
    if (k.startsWith('set:')) {
      if (v.trim()) settings[k.slice(4)] = v.trim();
      else cleared.push(k.slice(4));
    } else if (k.startsWith('secret:') && v) secrets[k.slice(7)] = v.replace(/\r?\n$/, '');
  }
  return { settings, secrets, cleared };
}

export function GatewaysScreen({ width, height }: { width: number; height: number }) {
  const deps = useDeps();
  const { ctx, actor } = deps;
  const [sel, setSel] = useState(0);
  const [flash, setFlash] = useState<FlashState>(null);
  const [prices, setPrices] = useState(false);
  const filter = useTypeFilter(() => setSel(0));
  const list = usePoll(2000, () => readRows(ctx));
  const all = list.data ?? [];
  const rows = filter.active ? all.filter((r) => filter.matches(r.g.name, r.g.kind, r.g.id, r.g.status)) : all;
  const cur = rows[Math.min(sel, rows.length - 1)];
  const priceList = usePoll(2000, async () => (prices ? await listPrices(ctx) : null), [prices]);
  // A gateway just added: selected once the list holds it.
  const selectId = useRef<string | null>(null);
  if (selectId.current) {
    const at = rows.findIndex((r) => r.g.id === selectId.current);
    if (at >= 0) {
      selectId.current = null;
      if (at !== sel) setSel(at);
    }
  }
  const overlay = useOverlay(setFlash, () => {
    list.reload();
    priceList.reload();
  });
  useMode(overlay.step || filter.typing ? 'form' : prices ? 'detail' : 'list');

  const steps: Record<string, () => Step | Promise<Step>> = {
    n: () => ({
      kind: 'form',
      title: 'Add a gateway: its kind',
      fields: [
        { key: 'name', label: 'Name', type: 'text', hint: 'letters, digits, . - _: twilio-main' },
        {
          key: 'kind',
          label: 'Kind',
          type: 'choice',
          options: ctx.gatewayKinds.specs.map((k) => ({ value: k.kind, label: `${k.kind}: ${k.label}` })),
          hint: '←→ choose',
        },
      ],
      submit: (v) => {
        const kind = str(v.kind);
        const name = str(v.name);
        if (!ctx.gatewayKinds.has(kind)) throw new Error(`unknown gateway kind "${kind}"`);
        if (!name) throw new Error('a name is required');
        return {
          kind: 'form',
          title: `Add ${kind} gateway ${name}`,
          note: 'Secrets are masked, stored encrypted, and never shown again.',
          fields: [...settingFields(ctx, kind), ...secretFields(ctx, kind, false)],
          submit: async (w) => {
            const { settings, secrets } = split(w);
            const g = await addGateway(ctx, { kind, name, settings, secrets }, actor);
            const url = deps.webhookUrl(g);
            // The new gateway selected, so the pane below is its own.
            selectId.current = g.id;
            return { text: `Added ${kind} gateway ${g.name}.${url ? ` Register its webhook URL: ${url}` : ''}` };
          },
        };
      },
    }),
    e: async () => {
      const g = await getGateway(ctx, cur!.g.id);
      return {
        kind: 'form',
        title: `Edit gateway ${g.name} (${g.kind})`,
        note: `Stored secrets: ${g.secret_names.join(', ') || 'none'} (values never shown).`,
        fields: [...settingFields(ctx, g.kind, g.settings), ...secretFields(ctx, g.kind, true)],
        submit: async (w) => {
          const { settings, secrets, cleared } = split(w);
          const unset = cleared.filter((k) => g.settings[k] !== undefined);
          const after = await updateGateway(ctx, g.id, { settings, unsetSettings: unset, secrets }, actor);
          const changed = Object.keys(secrets);
          return { text: `Updated gateway ${after.name}${changed.length ? ` (new ${changed.join(', ')})` : ''}.` };
        },
      };
    },
    d: () => {
      const g = cur!.g;
      const disable = g.status === 'active';
      return {
        kind: 'confirm',
        title: `${disable ? 'Disable' : 'Enable'} gateway ${g.name}?`,
        lines: disable
          ? [
              `Messages queued for ${g.name} wait (no attempts spent) until it is enabled again;`,
              `new sends on its ${cur!.channels} channel(s) are refused (403).`,
            ]
          : [`${g.name} sends again; the messages waiting for it take their places in its line.`],
        run: async () => {
          const after = await updateGateway(ctx, g.id, { status: disable ? 'disabled' : 'active' }, actor);
          return { text: `${disable ? 'Disabled' : 'Enabled'} gateway ${after.name}.` };
        },
      };
    },
    p: async () => {
      const partners = await listPartners(ctx);
      return {
        kind: 'form',
        title: 'Set a price',
        fields: [
          {
            key: 'channel',
            label: 'Channel',
            type: 'choice',
            options: CHANNEL_TYPES.map((c) => ({ value: c, label: c })),
            hint: '←→ choose',
          },
          {
            key: 'partner',
            label: 'For',
            type: 'choice',
            options: [
              { value: '', label: 'every partner (default)' },
              ...partners.map((p) => ({ value: p.id, label: p.slug })),
            ],
            hint: '←→ choose: the default, or one partner',
          },
          { key: 'amount', label: 'Amount', type: 'text', hint: 'decimal, e.g. 0.0075; empty removes the price' },
        ],
        submit: async (v) => {
          const channel = str(v.channel);
          const partner = str(v.partner) || undefined;
          const p = partner ? await getPartner(ctx, partner) : null;
          const whom = p ? `for ${p.slug}, overriding the default` : 'for every partner without an override';
          const per = channel === 'sms' ? 'per segment' : 'per message';
          const raw = str(v.amount);
          if (!raw)
            return {
              kind: 'confirm',
              title: `Remove the ${channel} price ${p ? `of ${p.slug}` : '(default)'}?`,
              lines: [
                p
                  ? `${p.slug} pays the default ${channel} price again.`
                  : `Partners without an override then send ${channel} for free.`,
              ],
              run: async () => {
                await unsetPrice(ctx, { channel, partner }, actor);
                return { text: `Removed the ${channel} price ${p ? `override of ${p.slug}` : 'default'}.` };
              },
            };
          const amount = parseMoney(raw);
          return {
            kind: 'confirm',
            title: `Set the ${channel} price?`,
            lines: [`${channel} costs ${money(amount, p?.currency)} ${per} ${whom}, from the next send on.`],
            run: async () => {
              await setPrice(ctx, { channel, amount, partner }, actor);
              return { text: `${channel} now costs ${money(amount, p?.currency)} ${per} ${whom}.` };
            },
          };
        },
      };
    },
  };

  // Reading Meta's catalogue takes a network call: the screen stays live, the flash says when it is done.
  const syncing = useRef(false);
  const syncTemplates = async (g: GatewayView) => {
    if (g.kind !== 'whatsapp_cloud')
      return setFlash({
        ok: false,
        text: `${g.name} is a ${g.kind} gateway: only WhatsApp Cloud gateways have templates.`,
      });
    if (syncing.current) return;
    syncing.current = true;
    setFlash({ ok: true, text: `Reading the templates of ${g.name} from Meta…` });
    try {
      const out = await syncGatewayTemplatesOnce(ctx, deps.config.dispatch.timeoutMs, g.id);
      setFlash(
        'error' in out
          ? {
              ok: false,
              text: `Could not read the templates of ${g.name}: ${out.error}. The last ones read stay in force.`,
            }
          : { ok: true, text: `Read ${out.templates} templates of ${g.name} from Meta.` },
      );
    } catch (e) {
      setFlash({ ok: false, text: deps.describeError(e) });
    } finally {
      syncing.current = false;
      list.reload();
    }
  };

  useKeys(
    (input, key) => {
      if (overlay.isOpen()) return;
      if (prices) {
        if (key.escape || input === 'P') setPrices(false);
        else if (input === 'p') overlay.openFrom(steps.p);
        return;
      }
      if (input === 'P') return setPrices(true);
      if (input === 't' && cur) return void syncTemplates(cur.g);
      if (filter.handle(input, key)) return;
      const step = steps[input];
      if (step && (input === 'n' || input === 'p' || cur)) return overlay.openFrom(step);
      setSel((s) => moveSel(s, rows.length, input, key));
    },
    { isActive: !overlay.step },
  );

  const over = overlay.element(width);
  const detailH = cur ? 10 : 0;
  const shownFlash = flash ?? (list.error ? { ok: false, text: list.error } : null);
  const flashH = flashLines(shownFlash, width);
  return (
    <Box flexDirection="column" width={width} height={height}>
      {over ??
        (prices ? (
          <PriceTable rows={priceList.data ?? []} loaded={!!priceList.data} width={width} height={height - 1} />
        ) : (
          <>
            {filter.active ? <FilterLine filter={filter} shown={rows.length} of={all.length} /> : null}
            <Table
              width={width}
              height={height - flashH - detailH - (filter.active ? 1 : 0)}
              selected={sel}
              empty={
                filter.active
                  ? 'No gateway matches the filter (Esc clears it).'
                  : 'No gateways yet: n adds one (sandbox needs no provider account).'
              }
              columns={[
                { title: 'name', width: 16 },
                { title: 'kind', width: 14 },
                { title: 'status', width: 8 },
                { title: 'rate/s', width: 13 },
                { title: 'chans', width: 5, align: 'right' },
                { title: 'circuit', width: 9 },
                { title: 'errors (last hour)', width: 0 },
              ]}
              rows={rows.map((r) => [
                r.g.name,
                r.g.kind,
                r.g.status,
                r.rate,
                String(r.channels),
                r.circuit?.state === 'half_open' ? 'half-open' : (r.circuit?.state ?? 'closed'),
                [
                  r.errors.length ? r.errors.map((e) => `${e.code} ×${e.n}`).join(', ') : 'none',
                  r.movedOn ? `moved to fallback ×${r.movedOn}` : null,
                ]
                  .filter(Boolean)
                  .join(' · '),
              ])}
            />
            {cur ? <GatewayDetail row={cur} width={width} /> : null}
          </>
        ))}
      <Flash
        width={width}
        flash={shownFlash}
        position={!over && !prices ? { at: Math.min(sel, rows.length - 1), of: rows.length } : null}
      />
    </Box>
  );
}

function GatewayDetail({ row, width }: { row: Row; width: number }) {
  const deps = useDeps();
  const { ctx } = deps;
  const g = row.g;
  const url = deps.webhookUrl(g);
  const settings = Object.entries(g.settings)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return (
    <Box flexDirection="column" borderStyle="single" width={width} height={10} overflow="hidden">
      <Text bold wrap="truncate-end">
        {clean(g.name)} · {ctx.gatewayKinds.get(g.kind).label} · {g.id}
      </Text>
      <Text wrap="truncate-end">
        webhook URL to register with the provider
        {url && !deps.config.server.publicUrl ? ' (local: set server.publicUrl)' : ''}:
      </Text>
      <Text wrap="wrap">{url ? clean(url) : 'none (this kind sends no webhooks)'}</Text>
      <Text wrap="truncate-end">settings: {clean(settings) || 'none'}</Text>
      <Text wrap="truncate-end">
        secrets: {g.secret_names.length ? `${g.secret_names.join(', ')} (values never shown)` : 'none'}
      </Text>
      <Text wrap="truncate-end">
        serves: {ctx.gatewayKinds.get(g.kind).channels.join(', ')}
        {row.templates ? ` · templates: ${row.templates}` : ''}
      </Text>
      <Text wrap="truncate-end">circuit: {clean(circuitText(row.circuit, deps.ctx.now()))}</Text>
    </Box>
  );
}

/** Every price: the default per channel, and each partner's own. */
function PriceTable({
  rows,
  loaded,
  width,
  height,
}: {
  rows: PriceListRow[];
  loaded: boolean;
  width: number;
  height: number;
}) {
  return (
    <Box flexDirection="column" width={width} height={height}>
      <Text bold wrap="truncate-end">
        Prices: the default per channel, and partners' own (p sets one · Esc back)
      </Text>
      <Table
        width={width}
        height={height - 1}
        empty={loaded ? 'No prices set: every send is free. p sets one.' : 'Reading…'}
        columns={[
          { title: 'channel', width: 10 },
          { title: 'for', width: 0 },
          { title: 'amount', width: 16, align: 'right' },
          { title: 'per', width: 8 },
          { title: 'updated (utc)', width: 16 },
        ]}
        rows={rows.map((r) => [
          r.channel_type,
          [
            r.partner_id
              ? (r.partner_slug ?? r.partner_id)
              : r.gateway_id
                ? 'every partner'
                : 'default (every partner)',
            r.gateway_id ? `through ${r.gateway_name ?? r.gateway_id}` : null,
            r.category ? `(${r.category} templates)` : null,
          ]
            .filter(Boolean)
            .join(' '),
          money(r.amount),
          r.channel_type === 'sms' ? 'segment' : 'message',
          when(r.updated_at).slice(0, 16),
        ])}
      />
    </Box>
  );
}
