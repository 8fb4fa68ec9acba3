/**
 * Usage: requests, tokens and refused requests over time by user path, model or provider, and
 * the top consumers with their cost and refusals.
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { api, type UsageBucket } from '../api.ts';
import { Field, FormMessage, fieldErrors, type FieldErrors } from '../components/controls.tsx';
import { TimeChart, type Series } from '../components/time-chart.tsx';
import { formatNumber, formatUsd, utcDay } from '../format.ts';

type GroupBy = 'user_path' | 'model' | 'provider';
type BucketSize = 'hour' | 'day';

const GROUP_LABELS: Record<GroupBy, string> = { user_path: 'User path', model: 'Model', provider: 'Provider' };
const BUCKET_SECONDS: Record<BucketSize, number> = { hour: 3600, day: 86_400 };
/** Groups drawn as their own line; the rest are summed into "others". */
const CHART_GROUPS = 6;
const TOP_CONSUMERS = 10;

interface Query {
  from: string;
  to: string;
  groupBy: GroupBy;
  bucket: BucketSize;
}

interface Totals {
  key: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costUsd: number;
  cacheHits: number;
  refused: number;
}

export function UsagePage() {
  const [query, setQuery] = useState<Query>({ from: utcDay(-6), to: utcDay(0), groupBy: 'user_path', bucket: 'day' });
  const [buckets, setBuckets] = useState<UsageBucket[] | undefined>(undefined);
  const [errors, setErrors] = useState<FieldErrors>({});

  useEffect(() => {
    let current = true;
    const params = new URLSearchParams({ from: query.from, to: query.to, group_by: query.groupBy, bucket: query.bucket });
    api<{ buckets: UsageBucket[] }>('GET', `/admin/usage?${params}`)
      .then((answer) => {
        if (!current) return;
        setBuckets(answer.buckets);
        setErrors({});
      })
      .catch((err: unknown) => current && setErrors(fieldErrors(err, { from: 'from', to: 'to', group_by: 'groupBy', bucket: 'bucket' })));
    return () => {
      current = false;
    };
  }, [query]);

  const totals = useMemo(() => totalsByKey(buckets ?? []), [buckets]);
  const charts = useMemo(() => chartData(buckets ?? [], totals, query), [buckets, totals]);
  const set = (patch: Partial<Query>) => setQuery({ ...query, ...patch });

  return (
    <section aria-labelledby="usage-title">
      <div class="page-head">
        <h1 id="usage-title">Usage</h1>
        <p class="muted">
          From the usage records, in UTC {query.bucket === 'hour' ? 'hours' : 'days'}; both dates included. Refused: requests answered 429 by a rate limit or a budget
          {query.groupBy === 'user_path' ? '' : `, under the ${query.groupBy} they asked for`}.
        </p>
      </div>
      <form class="card filters" onSubmit={(e) => e.preventDefault()} aria-label="Usage filters">
        <Field id="usage-from" label="From" error={errors.from}>
          {(a11y) => <input {...a11y} type="date" value={query.from} onChange={(e) => set({ from: e.currentTarget.value })} />}
        </Field>
        <Field id="usage-to" label="To" error={errors.to}>
          {(a11y) => <input {...a11y} type="date" value={query.to} onChange={(e) => set({ to: e.currentTarget.value })} />}
        </Field>
        <Field id="usage-group-by" label="Group by" error={errors.groupBy}>
          {(a11y) => (
            <select {...a11y} value={query.groupBy} onChange={(e) => set({ groupBy: e.currentTarget.value as GroupBy })}>
              <option value="user_path">User path</option>
              <option value="model">Model</option>
              <option value="provider">Provider</option>
            </select>
          )}
        </Field>
        <Field id="usage-bucket" label="Buckets" error={errors.bucket}>
          {(a11y) => (
            <select {...a11y} value={query.bucket} onChange={(e) => set({ bucket: e.currentTarget.value as BucketSize })}>
              <option value="day">Days</option>
              <option value="hour">Hours</option>
            </select>
          )}
        </Field>
        <FormMessage error={errors.form} />
      </form>
      {buckets === undefined ? (
        <p class="muted">Loading…</p>
      ) : buckets.length === 0 ? (
        <p class="empty">No usage recorded in this range.</p>
      ) : (
        <>
          <div class="charts">
            <figure class="card">
              <figcaption>Requests by {GROUP_LABELS[query.groupBy].toLowerCase()}</figcaption>
              <TimeChart label={`Requests over time by ${GROUP_LABELS[query.groupBy].toLowerCase()}`} xs={charts.xs} series={charts.requests} />
            </figure>
            <figure class="card">
              <figcaption>Tokens (prompt + completion) by {GROUP_LABELS[query.groupBy].toLowerCase()}</figcaption>
              <TimeChart label={`Tokens over time by ${GROUP_LABELS[query.groupBy].toLowerCase()}`} xs={charts.xs} series={charts.tokens} />
            </figure>
            <figure class="card" data-chart="refused">
              <figcaption>Refused requests (429) by {GROUP_LABELS[query.groupBy].toLowerCase()}</figcaption>
              {charts.refused.length === 0 ? (
                <p class="empty">No request was refused in this range.</p>
              ) : (
                <TimeChart label={`Refused requests over time by ${GROUP_LABELS[query.groupBy].toLowerCase()}`} xs={charts.xs} series={charts.refused} />
              )}
            </figure>
          </div>
          <TopConsumers totals={totals} groupBy={query.groupBy} />
        </>
      )}
    </section>
  );
}

function TopConsumers({ totals, groupBy }: { totals: Totals[]; groupBy: GroupBy }) {
  return (
    <div class="table-wrap card">
      <table>
        <caption>Top consumers by tokens</caption>
        <thead>
          <tr>
            <th scope="col">{GROUP_LABELS[groupBy]}</th>
            <th scope="col" class="number">Requests</th>
            <th scope="col" class="number">Prompt tokens</th>
            <th scope="col" class="number">Completion tokens</th>
            <th scope="col" class="number">Total tokens</th>
            <th scope="col" class="number">Cost</th>
            <th scope="col" class="number">Cache hits</th>
            <th scope="col" class="number">Refused</th>
          </tr>
        </thead>
        <tbody>
          {totals.slice(0, TOP_CONSUMERS).map((t) => (
            <tr key={t.key} data-consumer={t.key}>
              <th scope="row">{t.key === '' ? <span class="muted">(none)</span> : t.key}</th>
              <td class="number">{formatNumber(t.requests)}</td>
              <td class="number">{formatNumber(t.promptTokens)}</td>
              <td class="number">{formatNumber(t.completionTokens)}</td>
              <td class="number">{formatNumber(t.promptTokens + t.completionTokens)}</td>
              <td class="number">{formatUsd(t.costUsd)}</td>
              <td class="number">{formatNumber(t.cacheHits)}</td>
              <td class="number">{formatNumber(t.refused)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Every group's totals over the range, most tokens first (then most requests). */
function totalsByKey(buckets: UsageBucket[]): Totals[] {
  const byKey = new Map<string, Totals>();
  for (const b of buckets) {
    let t = byKey.get(b.key);
    if (!t) {
      t = { key: b.key, requests: 0, promptTokens: 0, completionTokens: 0, costUsd: 0, cacheHits: 0, refused: 0 };
      byKey.set(b.key, t);
    }
    t.requests += b.requests;
    t.promptTokens += b.prompt_tokens;
    t.completionTokens += b.completion_tokens;
    t.costUsd += b.cost_usd;
    t.cacheHits += b.cache_hits;
    t.refused += b.refused;
  }
  const tokens = (t: Totals) => t.promptTokens + t.completionTokens;
  return [...byKey.values()].sort((a, b) => tokens(b) - tokens(a) || b.requests - a.requests || (a.key < b.key ? -1 : 1));
}

/**
 * One point per bucket of the whole range (zeros where nothing was recorded), one line per top
 * group; refusals with a line per group most refused (none when nothing was refused).
 */
function chartData(buckets: UsageBucket[], totals: Totals[], query: Query): { xs: number[]; requests: Series[]; tokens: Series[]; refused: Series[] } {
  const step = BUCKET_SECONDS[query.bucket];
  const first = Date.parse(`${query.from}T00:00:00Z`) / 1000;
  const end = Date.parse(`${query.to}T00:00:00Z`) / 1000 + 86_400;
  const xs: number[] = [];
  for (let t = first; t < end; t += step) xs.push(t);
  const shown = totals.slice(0, CHART_GROUPS).map((t) => t.key);
  const lineOf = new Map(shown.map((key, i) => [key, i]));
  const lines = shown.length + (totals.length > shown.length ? 1 : 0);
  const requests = Array.from({ length: lines }, () => new Array<number>(xs.length).fill(0));
  const tokens = Array.from({ length: lines }, () => new Array<number>(xs.length).fill(0));
  for (const b of buckets) {
    const index = Math.round((Date.parse(b.start) / 1000 - first) / step);
    if (index < 0 || index >= xs.length) continue;
    const line = lineOf.get(b.key) ?? shown.length;
    requests[line]![index]! += b.requests;
    tokens[line]![index]! += b.prompt_tokens + b.completion_tokens;
  }
  const labels = [...shown.map((key) => (key === '' ? '(none)' : key)), 'others'];
  return {
    xs,
    requests: requests.map((values, i) => ({ label: labels[i]!, values })),
    tokens: tokens.map((values, i) => ({ label: labels[i]!, values })),
    refused: refusedLines(buckets, totals, xs, first, step),
  };
}

/** The refusals, a line per group among the most refused, the rest as "others". */
function refusedLines(buckets: UsageBucket[], totals: Totals[], xs: number[], first: number, step: number): Series[] {
  const refusing = totals.filter((t) => t.refused > 0).sort((a, b) => b.refused - a.refused || (a.key < b.key ? -1 : 1));
  if (refusing.length === 0) return [];
  const shown = refusing.slice(0, CHART_GROUPS).map((t) => t.key);
  const lineOf = new Map(shown.map((key, i) => [key, i]));
  const lines = Array.from({ length: shown.length + (refusing.length > shown.length ? 1 : 0) }, () => new Array<number>(xs.length).fill(0));
  for (const b of buckets) {
    if (b.refused === 0) continue;
    const index = Math.round((Date.parse(b.start) / 1000 - first) / step);
    if (index < 0 || index >= xs.length) continue;
    lines[lineOf.get(b.key) ?? shown.length]![index]! += b.refused;
  }
  const labels = [...shown.map((key) => (key === '' ? '(none)' : key)), 'others'];
  return lines.map((values, i) => ({ label: labels[i]!, values }));
}
