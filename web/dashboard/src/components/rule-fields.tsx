/**
 * The fields of a rate-limit rule (scope, subject, period, caps) as one controlled group, used by
 * the create form and the move dialog, and the admin API body they make.
 */
import type { RuleStatus, Scope } from '../api.ts';
import { SCOPE_LABELS } from '../format.ts';
import { Field, type FieldErrors } from './controls.tsx';
import { numeric } from './definitions.tsx';

export type PeriodChoice = 'minute' | 'hour' | 'day' | 'concurrent' | 'custom';

export interface RuleDraft {
  scope: Scope;
  subject: string;
  period: PeriodChoice;
  /** Seconds of a custom window, as typed. */
  periodSeconds: string;
  maxRequests: string;
  maxTokens: string;
  /** User-path rules: each direct child of the path gets its own counter. */
  perChild: boolean;
}

export const EMPTY_DRAFT: RuleDraft = { scope: 'user_path', subject: '', period: 'minute', periodSeconds: '', maxRequests: '', maxTokens: '', perChild: false };

const NAMED_PERIODS: Record<number, PeriodChoice> = { 60: 'minute', 3600: 'hour', 86_400: 'day', 0: 'concurrent' };

/** The admin API's parameter names → this group's fields, to show a 400 beside its field. */
export const RULE_PARAMS: Readonly<Record<string, string>> = {
  scope: 'scope',
  subject: 'subject',
  user_path: 'subject',
  limit_key: 'period',
  'limit_key.period': 'period',
  'limit_key.period_seconds': 'periodSeconds',
  max_requests: 'maxRequests',
  max_tokens: 'maxTokens',
  per_child: 'perChild',
};

export function draftOf(rule: RuleStatus): RuleDraft {
  const period = NAMED_PERIODS[rule.period_seconds] ?? 'custom';
  return {
    scope: rule.scope,
    subject: rule.subject,
    period,
    periodSeconds: period === 'custom' ? String(rule.period_seconds) : '',
    maxRequests: rule.max_requests === undefined ? '' : String(rule.max_requests),
    maxTokens: rule.max_tokens === undefined ? '' : String(rule.max_tokens),
    perChild: rule.per_child === true,
  };
}

/** Seconds of the draft's period; NaN when a custom period is not a number yet. */
export function draftPeriodSeconds(draft: RuleDraft): number {
  switch (draft.period) {
    case 'minute':
      return 60;
    case 'hour':
      return 3600;
    case 'day':
      return 86_400;
    case 'concurrent':
      return 0;
    case 'custom':
      return draft.periodSeconds.trim() === '' ? Number.NaN : Number(draft.periodSeconds);
  }
}

/**
 * The `PUT /admin/rate-limits` body. Values go as typed (numbers when they read as numbers): the
 * gateway is the one judge of what is valid, and its 400 names the field.
 */
export function putBody(draft: RuleDraft): Record<string, unknown> {
  const limitKey = draft.period === 'custom' ? { period_seconds: numeric(draft.periodSeconds) } : { period: draft.period };
  const body: Record<string, unknown> = { scope: draft.scope, subject: draft.subject, limit_key: limitKey };
  if (draft.maxRequests.trim() !== '') body.max_requests = numeric(draft.maxRequests);
  if (draft.maxTokens.trim() !== '' && draft.period !== 'concurrent') body.max_tokens = numeric(draft.maxTokens);
  if (draft.scope === 'user_path' && draft.perChild) body.per_child = true;
  return body;
}

const SUBJECT_HINTS: Record<Scope, string> = {
  user_path: 'A path such as /team/a: the rule covers it and everything below it.',
  provider: 'A provider instance name from the configuration.',
  model: 'provider/model for one provider, or a bare model name for any provider.',
};

interface RuleFieldsProps {
  /** Prefix of the inputs' ids (unique on the page). */
  id: string;
  draft: RuleDraft;
  errors: FieldErrors;
  onChange: (draft: RuleDraft) => void;
  /** Only the caps can change (edit): scope, subject and period are shown but locked. */
  capsOnly?: boolean;
}

export function RuleFields({ id, draft, errors, onChange, capsOnly = false }: RuleFieldsProps) {
  const set = (patch: Partial<RuleDraft>) => onChange({ ...draft, ...patch });
  const text = (field: 'subject' | 'periodSeconds' | 'maxRequests' | 'maxTokens') => (event: Event) =>
    set({ [field]: (event.currentTarget as HTMLInputElement).value });
  return (
    <div class="rule-fields">
      <Field id={`${id}-scope`} label="Scope" error={errors.scope}>
        {(a11y) => (
          <select {...a11y} value={draft.scope} disabled={capsOnly} onChange={(e) => set({ scope: e.currentTarget.value as Scope })}>
            {(Object.keys(SCOPE_LABELS) as Scope[]).map((scope) => (
              <option value={scope}>{SCOPE_LABELS[scope]}</option>
            ))}
          </select>
        )}
      </Field>
      <Field id={`${id}-subject`} label={SCOPE_LABELS[draft.scope]} error={errors.subject} hint={capsOnly ? undefined : SUBJECT_HINTS[draft.scope]}>
        {(a11y) => <input {...a11y} type="text" value={draft.subject} readOnly={capsOnly} autocomplete="off" spellcheck={false} onInput={text('subject')} />}
      </Field>
      <Field id={`${id}-period`} label="Period" error={errors.period}>
        {(a11y) => (
          <select {...a11y} value={draft.period} disabled={capsOnly} onChange={(e) => set({ period: e.currentTarget.value as PeriodChoice })}>
            <option value="minute">Minute</option>
            <option value="hour">Hour</option>
            <option value="day">Day</option>
            <option value="concurrent">Concurrent (in flight)</option>
            <option value="custom">Custom (seconds)</option>
          </select>
        )}
      </Field>
      {draft.period === 'custom' && (
        <Field id={`${id}-period-seconds`} label="Window (seconds)" error={errors.periodSeconds}>
          {(a11y) => <input {...a11y} type="number" inputMode="numeric" value={draft.periodSeconds} readOnly={capsOnly} onInput={text('periodSeconds')} />}
        </Field>
      )}
      <Field id={`${id}-max-requests`} label={draft.period === 'concurrent' ? 'Max in flight' : 'Max requests'} error={errors.maxRequests}>
        {(a11y) => <input {...a11y} type="number" inputMode="numeric" value={draft.maxRequests} onInput={text('maxRequests')} />}
      </Field>
      {draft.period !== 'concurrent' && (
        <Field id={`${id}-max-tokens`} label="Max tokens" error={errors.maxTokens}>
          {(a11y) => <input {...a11y} type="number" inputMode="numeric" value={draft.maxTokens} onInput={text('maxTokens')} />}
        </Field>
      )}
      {draft.scope === 'user_path' && (
        <Field
          id={`${id}-per-child`}
          label="Per child"
          error={errors.perChild}
          hint={capsOnly ? undefined : 'Each direct child of the path (/team/alice under /team) gets these caps on a counter of its own.'}
        >
          {(a11y) => <input {...a11y} type="checkbox" checked={draft.perChild} disabled={capsOnly} onChange={(e) => set({ perChild: e.currentTarget.checked })} />}
        </Field>
      )}
    </div>
  );
}
