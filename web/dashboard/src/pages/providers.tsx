/**
 * Providers: what each provider's own answers said of its rate limits, per model (polled) —
 * remaining requests and tokens against the provider's own limits, their resets counting down,
 * cooldowns after a refusal, whether the gateway routes around the model now, and when the
 * provider last refused.
 */
import { type LearnedCapacity } from '../api.ts';
import { ListTable, UsageBar } from '../components/controls.tsx';
import { useLiveList } from '../components/live-list.ts';
import { formatCountdown, formatNumber } from '../format.ts';

/** Resets are seconds away, and what the answers say changes with every request. */
const POLL_MS = 2000;

type Learned = LearnedCapacity['providers'][number];

const CAUSES: Readonly<Record<NonNullable<Learned['cause']>, string>> = {
  cooldown: 'cooling down after a refusal',
  requests: 'request limit spent',
  tokens: 'token limit spent',
};

export function ProvidersPage({ onDisabled }: { onDisabled: () => void }) {
  const { list, loadError, nowMs } = useLiveList<LearnedCapacity>('/admin/providers', POLL_MS, onDisabled);
  return (
    <section aria-labelledby="providers-title">
      <div class="page-head">
        <h1 id="providers-title">Providers</h1>
        <p class="muted live">
          What each provider's answers said of its own rate limits, per model; a model whose limit is spent, or that refused, is routed around until
          its reset — refreshes every {POLL_MS / 1000} s
          {list && <> · server time {list.server_time.slice(11, 19)} UTC</>}
        </p>
      </div>
      {loadError && <p class="form-error" role="alert">Could not load the providers: {loadError}</p>}
      <ListTable
        class="rules"
        items={list?.providers}
        caption="Capacity learned from each provider's answers, per model"
        columns={['Provider / model', 'Requests', 'Resets in', 'Tokens', 'Resets in', 'Status', 'Last refused']}
        empty="Nothing learned yet: no provider's answer has said anything of its rate limits so far."
        row={(learned) => <ProviderRow key={`${learned.provider}/${learned.model}`} learned={learned} nowMs={nowMs} />}
      />
    </section>
  );
}

function ProviderRow({ learned, nowMs }: { learned: Learned; nowMs: number }) {
  const name = `${learned.provider}/${learned.model}`;
  const saturatedFor = learned.saturated_until === null ? 0 : (Date.parse(learned.saturated_until) - nowMs) / 1000;
  const saturated = learned.saturated && saturatedFor > 0;
  return (
    <tr data-target={name}>
      <th scope="row" class="subject">
        {learned.provider}
        <span class="muted"> / {learned.model}</span>
      </th>
      <td>
        <Remaining label={`Requests remaining, ${name}`} limit={learned.requests_limit} remaining={learned.requests_remaining} />
      </td>
      <td class="countdown">
        <Countdown at={learned.requests_reset_at} nowMs={nowMs} />
      </td>
      <td>
        <Remaining label={`Tokens remaining, ${name}`} limit={learned.tokens_limit} remaining={learned.tokens_remaining} />
      </td>
      <td class="countdown">
        <Countdown at={learned.tokens_reset_at} nowMs={nowMs} />
      </td>
      <td class="status">
        {saturated ? (
          <span class="badge saturated" title={`Routed around until ${learned.saturated_until}`}>
            routed around · {CAUSES[learned.cause!]} · {formatCountdown(saturatedFor)}
          </span>
        ) : (
          <span class="badge capacity">has capacity</span>
        )}
      </td>
      <td class="muted">{learned.throttled_at === null ? '—' : <time dateTime={learned.throttled_at}>{ago(learned.throttled_at, nowMs)}</time>}</td>
    </tr>
  );
}

/** What remains of a provider's own limit: a bar when the limit is known, else the count. */
function Remaining({ label, limit, remaining }: { label: string; limit: number | null; remaining: number | null }) {
  if (remaining === null) return <span class="muted">—</span>;
  if (limit === null || limit < remaining) return <span class="usage-numbers">{formatNumber(remaining)} left</span>;
  return <UsageBar label={label} used={limit - remaining} cap={limit} />;
}

function Countdown({ at, nowMs }: { at: string | null; nowMs: number }) {
  if (at === null) return <span class="muted">—</span>;
  const seconds = (Date.parse(at) - nowMs) / 1000;
  return <time dateTime={at}>{seconds > 0 ? formatCountdown(seconds) : 'reset'}</time>;
}

/** `14:02:07 UTC (42s ago)`. */
function ago(iso: string, nowMs: number): string {
  return `${iso.slice(11, 19)} UTC (${formatCountdown((nowMs - Date.parse(iso)) / 1000)} ago)`;
}
