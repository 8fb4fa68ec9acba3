/**
 * "Explain a request": what a request would meet right now, from the gateway's dry run, and
 * whether a refused one would wait for capacity.
 */
import { useState } from 'preact/hooks';
import { ApiError, api, type Explanation, type Priority } from '../api.ts';
import { Field, FormMessage, UsageBar, fieldErrors, type FieldErrors } from '../components/controls.tsx';
import { PRIORITIES, SCOPE_LABELS, formatNumber, formatUsd } from '../format.ts';

const ENDPOINTS = [
  ['chat', 'Chat completions'],
  ['responses', 'Responses'],
  ['embeddings', 'Embeddings'],
  ['messages', 'Anthropic messages'],
  ['speech', 'Speech'],
  ['transcriptions', 'Transcriptions'],
  ['realtime', 'Realtime session'],
  ['batches', 'Batch submission'],
] as const;

export function ExplainPage({ onDisabled }: { onDisabled: () => void }) {
  const [model, setModel] = useState('');
  const [userPath, setUserPath] = useState('');
  const [endpoint, setEndpoint] = useState('chat');
  const [priority, setPriority] = useState<Priority>('normal');
  const [maxWait, setMaxWait] = useState('');
  const [maxTokens, setMaxTokens] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const [result, setResult] = useState<Explanation | undefined>(undefined);

  const submit = async (event: Event) => {
    event.preventDefault();
    const params = new URLSearchParams({ model, endpoint, priority });
    if (userPath.trim() !== '') params.set('user_path', userPath);
    if (maxWait.trim() !== '') params.set('max_wait', maxWait.trim());
    if (maxTokens.trim() !== '') params.set('max_tokens', maxTokens.trim());
    try {
      setResult(await api<Explanation>('GET', `/admin/rate-limits/explain?${params}`));
      setErrors({});
    } catch (err) {
      if (err instanceof ApiError && err.featureUnavailable) return onDisabled();
      // An unknown model is a 404 without a param: it still belongs beside the model field.
      if (err instanceof ApiError && err.code === 'model_not_found') setErrors({ model: err.message });
      else setErrors(fieldErrors(err, { model: 'model', user_path: 'userPath', endpoint: 'endpoint', priority: 'priority', max_wait: 'maxWait', max_tokens: 'maxTokens' }));
      setResult(undefined);
    }
  };

  return (
    <section aria-labelledby="explain-title">
      <div class="page-head">
        <h1 id="explain-title">Explain a request</h1>
        <p class="muted">A dry run: what a request would meet right now. Nothing is counted.</p>
      </div>
      <form class="card" onSubmit={submit} noValidate aria-label="Request to explain">
        <div class="rule-fields">
          <Field id="explain-model" label="Model" error={errors.model} hint="A model, provider/model or alias, as a client would send it.">
            {(a11y) => <input {...a11y} type="text" value={model} autocomplete="off" spellcheck={false} onInput={(e) => setModel(e.currentTarget.value)} />}
          </Field>
          <Field id="explain-user-path" label="User path" error={errors.userPath} hint="Empty means /.">
            {(a11y) => <input {...a11y} type="text" value={userPath} autocomplete="off" spellcheck={false} placeholder="/" onInput={(e) => setUserPath(e.currentTarget.value)} />}
          </Field>
          <Field id="explain-endpoint" label="Endpoint" error={errors.endpoint}>
            {(a11y) => (
              <select {...a11y} value={endpoint} onChange={(e) => setEndpoint(e.currentTarget.value)}>
                {ENDPOINTS.map(([value, label]) => (
                  <option value={value}>{label}</option>
                ))}
              </select>
            )}
          </Field>
          <Field id="explain-priority" label="Priority" error={errors.priority} hint="X-Floodgate-Priority: its share of each cap with headroom.">
            {(a11y) => (
              <select {...a11y} value={priority} onChange={(e) => setPriority(e.currentTarget.value as Priority)}>
                {PRIORITIES.map((value) => (
                  <option value={value}>{value}</option>
                ))}
              </select>
            )}
          </Field>
          <Field id="explain-max-wait" label="Max wait (seconds)" error={errors.maxWait} hint="X-Floodgate-Max-Wait; empty means the gateway's default.">
            {(a11y) => <input {...a11y} type="text" inputMode="decimal" value={maxWait} autocomplete="off" spellcheck={false} placeholder="0" onInput={(e) => setMaxWait(e.currentTarget.value)} />}
          </Field>
          <Field id="explain-max-tokens" label="Max tokens" error={errors.maxTokens} hint="With reservations on: the completion the request allows (max_tokens); empty means the gateway's default.">
            {(a11y) => <input {...a11y} type="text" inputMode="numeric" value={maxTokens} autocomplete="off" spellcheck={false} onInput={(e) => setMaxTokens(e.currentTarget.value)} />}
          </Field>
        </div>
        <FormMessage error={errors.form} />
        <button type="submit" class="primary">
          Explain
        </button>
      </form>
      {result && <Result result={result} />}
    </section>
  );
}

function Result({ result }: { result: Explanation }) {
  const admitted = result.decision === 'admitted';
  return (
    <div class="card explain-result" aria-live="polite">
      <h2 class={admitted ? 'decision admitted' : 'decision refused'}>
        {admitted ? '✓ Admitted' : '✕ Refused (429)'}
        <span class="muted">
          {' '}
          — {result.model} as {result.user_path}, {result.priority} priority
        </span>
      </h2>
      {admitted && result.target && (
        <p>
          Would be sent to <strong>{result.target.provider}/{result.target.model}</strong>.
        </p>
      )}
      {result.reservation && (
        <p class="reservation">
          Would reserve {formatNumber(result.reservation.tokens)} tokens on its token limits
          {result.reservation.cost_usd !== undefined && ` and ${formatUsd(result.reservation.cost_usd)} on its budgets`} until it ends
          <span class="muted"> (the completion it allows, without a prompt: a real request adds its prompt's tokens)</span>.
        </p>
      )}
      {result.breach && (
        <p class="breach">
          <strong>{result.breach.message}</strong> · Retry-After: {result.breach.retry_after_seconds} s
        </p>
      )}
      {!admitted && (
        <p class={result.wait.would_wait ? 'wait would-wait' : 'wait'}>
          {result.wait.would_wait
            ? `Would wait for capacity, at most ${result.wait.at_most_seconds} s, and be served as soon as the rule has room; the 429 only if its wait runs out.`
            : 'Would not wait: the 429 is answered at once (no wait asked for, or the refusal lasts longer than the wait).'}
        </p>
      )}
      <h3>Targets</h3>
      <table>
        <thead>
          <tr>
            <th scope="col">Target</th>
            <th scope="col">Role</th>
            <th scope="col">Capacity</th>
          </tr>
        </thead>
        <tbody>
          {result.targets.map((t) => (
            <tr>
              <th scope="row">
                {t.provider}/{t.model}
              </th>
              <td>{t.failover ? 'failover' : 'primary'}</td>
              <td>
                {t.has_capacity ? 'has capacity' : `saturated: ${t.breach?.message ?? ''}`}
                {t.learned && t.learned_reset_at !== undefined && <span class="badge saturated">learned · until {t.learned_reset_at.slice(11, 19)} UTC</span>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h3>Rules that apply</h3>
      {result.rules.length === 0 ? (
        <p class="muted">No rule applies to this request.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">Rule</th>
              <th scope="col">Requests / in flight</th>
              <th scope="col">Tokens</th>
            </tr>
          </thead>
          <tbody>
            {result.rules.map((rule) => {
              const name = `${SCOPE_LABELS[rule.scope]} ${rule.subject} (${rule.period_label})`;
              const concurrent = rule.period_seconds === 0;
              return (
                <tr>
                  <th scope="row">
                    {name}
                    {rule.source === 'config' && <span class="badge config">config</span>}
                  </th>
                  <td>
                    <UsageBar label={`${concurrent ? 'In flight' : 'Requests used'}, ${name}`} used={concurrent ? rule.in_flight : rule.requests_used} cap={rule.max_requests} />
                  </td>
                  <td>{concurrent ? <span class="muted">—</span> : <UsageBar label={`Tokens used, ${name}`} used={rule.tokens_used} reserved={rule.tokens_reserved} cap={rule.max_tokens} />}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  );
}
