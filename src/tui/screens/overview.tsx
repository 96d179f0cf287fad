import { hostname } from 'node:os';
import { Box, Text } from 'ink';
import { readOverview, type Overview, type Tally } from '../data/overview.js';
import { useDeps, useMode, usePoll } from '../hooks.js';
import { liveness } from '../liveness.js';
import { useTheme } from '../theme.js';
import { clean, count, fit, money } from '../text.js';

// The overview: what msgd is doing right now, from its counters and heartbeat. Refreshed every
// second; the counters themselves move every two (msgd's beat).

const t = (x: Tally) => `${count(x.minute)}/${count(x.hour)}`;

function Section({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <Box flexDirection="column" marginBottom={0}>
      <Text bold underline>
        {title}
      </Text>
      {children}
    </Box>
  );
}

export function OverviewScreen({ width, height }: { width: number; height: number }) {
  useMode('list');
  const deps = useDeps();
  const theme = useTheme();
  const { data, error } = usePoll(1000, () => readOverview(deps.ctx));
  if (!data) return <Text>{error ?? 'Reading…'}</Text>;
  const o: Overview = data;
  const q = o.queue;
  const gwRows = Math.max(1, Math.floor((height - 12) / 2));
  const gws = o.gateways.slice(0, gwRows);
  const nameW = Math.max(12, Math.min(24, width - 60));
  return (
    <Box flexDirection="column" width={width} height={height}>
      <Section title="Queue">
        {q ? (
          <Text>
            waiting {count(q.waiting, q.cap)} · in flight {count(q.inFlight, q.cap)} · retrying{' '}
            {count(q.retrying, q.cap)} ·{' '}
            <Text color={q.dead > 0 ? theme.bad : undefined}>dead jobs {count(q.dead, q.cap)}</Text>
            {liveness(o.server, hostname()).state === 'running' ? '' : ' (as msgd last saw it)'}
          </Text>
        ) : (
          <Text dimColor>no figures yet: msgd has not written its first heartbeat on this data directory</Text>
        )}
      </Section>
      <Section title="Gateways (last minute/last hour)">
        <Text bold wrap="truncate-end">
          {fit('GATEWAY', nameW)} {fit('KIND', 14)} {fit('SENT', 11, 'right')} {fit('FAILED', 11, 'right')}{' '}
          {fit('RETRIED', 11, 'right')} TOP ERROR
        </Text>
        {gws.length === 0 ? <Text dimColor>No gateways. Add one on the Gateways screen (3).</Text> : null}
        {gws.map((g) => (
          <Text key={g.id} wrap="truncate-end">
            {fit(clean(g.name) + (g.status === 'disabled' ? ' (off)' : ''), nameW)} {fit(g.kind, 14)}{' '}
            {fit(t(g.sent), 11, 'right')}{' '}
            <Text color={g.failed.minute > 0 ? theme.bad : undefined}>{fit(t(g.failed), 11, 'right')}</Text>{' '}
            {fit(t(g.retried), 11, 'right')}{' '}
            {g.errors[0] ? `${clean(g.errors[0].code)} ×${count(g.errors[0].hour)}` : '-'}
          </Text>
        ))}
        {o.gateways.length > gws.length ? (
          <Text dimColor>…and {o.gateways.length - gws.length} more (Gateways screen)</Text>
        ) : null}
      </Section>
      <Section title="Provider webhooks in (last minute/last hour)">
        {o.webhooksIn.length === 0 ? <Text dimColor>None in the last hour.</Text> : null}
        {o.webhooksIn.slice(0, 4).map((p) => (
          <Text key={p.provider} wrap="truncate-end">
            {fit(p.provider, 10)} verified {fit(t(p.verified), 11)} bad signature{' '}
            <Text color={p.bad_signature.minute > 0 ? theme.bad : undefined}>{fit(t(p.bad_signature), 9)}</Text>{' '}
            unroutable <Text color={p.unroutable.minute > 0 ? theme.warn : undefined}>{t(p.unroutable)}</Text>
          </Text>
        ))}
      </Section>
      <Section title="Deliveries to partner endpoints (last minute/last hour)">
        <Text wrap="truncate-end">
          ok {t(o.deliveries.ok)} · failed{' '}
          <Text color={o.deliveries.failed.minute > 0 ? theme.bad : undefined}>{t(o.deliveries.failed)}</Text> ·
          endpoints failing {o.deliveries.failingEndpoints} · disabled{' '}
          <Text color={o.deliveries.disabledEndpoints > 0 ? theme.warn : undefined}>
            {o.deliveries.disabledEndpoints}
          </Text>
        </Text>
      </Section>
      <Section title="Partners under their low-balance threshold">
        {o.lowBalance.length === 0 ? <Text dimColor>None.</Text> : null}
        {o.lowBalance.length > 0 ? (
          <Text wrap="truncate-end">
            {o.lowBalance
              .slice(0, 6)
              .map((p) => `${clean(p.slug)} ${money(p.balance, p.currency)} (< ${money(p.threshold)})`)
              .join(' · ')}
            {o.lowBalance.length > 6 ? ` · +${o.lowBalance.length - 6} more` : ''}
          </Text>
        ) : null}
      </Section>
      {error ? <Text color={theme.bad}>✗ {error}</Text> : null}
    </Box>
  );
}
