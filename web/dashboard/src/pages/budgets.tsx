/**
 * Budgets: every spend cap with what its path spent in the current period (polled), a countdown to
 * the period's end, and the changes the admin API offers: create, change a cap, delete.
 */
import { useState } from 'preact/hooks';
import { api, type BudgetList, type BudgetStatus } from '../api.ts';
import { Field, FormMessage, ListTable, UsageBar, fieldErrors, type FieldErrors } from '../components/controls.tsx';
import { ActionsCell, ChangeDialog, DefinitionRow, DeleteDialog, SourceCell, numeric } from '../components/definitions.tsx';
import { useLiveList } from '../components/live-list.ts';
import { formatCountdown, formatUsd } from '../format.ts';

/** Spend moves with every request but is read from storage every few seconds: no faster poll helps. */
const POLL_MS = 5000;
const NAMED = ['day', 'week', 'month'] as const;
type PeriodChoice = (typeof NAMED)[number] | 'custom';

/** The admin API's parameter names → the form's fields, to show a 400 beside its field. */
const BUDGET_PARAMS: Readonly<Record<string, string>> = {
  user_path: 'userPath',
  limit_key: 'period',
  'limit_key.period': 'period',
  'limit_key.period_seconds': 'periodSeconds',
  max_usd: 'maxUsd',
};

type Action = { kind: 'edit' | 'delete'; budget: BudgetStatus };

function budgetName(budget: BudgetStatus): string {
  return `${budget.period_label} budget of ${budget.user_path}`;
}

/** The `limit_key` naming a budget's period: a name, or the seconds of a custom window (`3600s`). */
function limitKeyOf(periodLabel: string): { period: string } | { period_seconds: number } {
  return (NAMED as readonly string[]).includes(periodLabel) ? { period: periodLabel } : { period_seconds: Number(periodLabel.slice(0, -1)) };
}

export function BudgetsPage({ onDisabled }: { onDisabled: () => void }) {
  const { list, loadError, nowMs, show } = useLiveList<BudgetList>('/admin/budgets', POLL_MS, onDisabled);
  const [action, setAction] = useState<Action | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);

  const done = (next: BudgetList, message: string) => {
    show(next);
    setAction(undefined);
    setNotice(message);
  };

  return (
    <section aria-labelledby="budgets-title">
      <div class="page-head">
        <h1 id="budgets-title">Budgets</h1>
        <p class="muted live">
          Spend caps in US dollars per user path and its subtree, in UTC periods; spend refreshes every {POLL_MS / 1000} s
          {list && <> · server time {list.server_time.slice(11, 19)} UTC</>}
        </p>
      </div>
      <p class="notice" role="status">
        {notice ?? ''}
      </p>
      {loadError && <p class="form-error" role="alert">Could not load the budgets: {loadError}</p>}
      <BudgetTable budgets={list?.budgets} nowMs={nowMs} onAction={setAction} />
      <CreateBudget onCreated={(next) => done(next, 'Budget saved.')} />
      {action?.kind === 'edit' && (
        <EditCapDialog budget={action.budget} onClose={() => setAction(undefined)} onDone={(next) => done(next, `Cap of the ${budgetName(action.budget)} updated; its spend was kept.`)} />
      )}
      {action?.kind === 'delete' && (
        <DeleteDialog
          noun="budget"
          onClose={() => setAction(undefined)}
          run={() => api<BudgetList>('DELETE', '/admin/budgets', { user_path: action.budget.user_path, limit_key: limitKeyOf(action.budget.period_label) })}
          onDone={(next) => done(next, `Deleted the ${budgetName(action.budget)}.`)}
        >
          <p>Delete the {budgetName(action.budget)}? Its cap stops applying at once; the spend stays in the usage records.</p>
        </DeleteDialog>
      )}
    </section>
  );
}

interface BudgetTableProps {
  budgets: BudgetStatus[] | undefined;
  /** The gateway's clock, in ms. */
  nowMs: number;
  onAction: (action: Action) => void;
}

function BudgetTable({ budgets, nowMs, onAction }: BudgetTableProps) {
  return (
    <ListTable
      class="rules"
      items={budgets}
      caption="Budgets and their spend in the current period"
      columns={['User path', 'Period', 'Source', 'Spent', 'Current period', 'Ends in', 'Actions']}
      empty="No budgets yet: create one below."
      row={(budget) => <BudgetRow key={`${budget.user_path.toLowerCase()} ${budget.period_label}`} budget={budget} nowMs={nowMs} onAction={onAction} />}
    />
  );
}

function BudgetRow({ budget, nowMs, onAction }: { budget: BudgetStatus; nowMs: number; onAction: (action: Action) => void }) {
  const name = budgetName(budget);
  return (
    <DefinitionRow source={budget.source} data={{ 'data-budget': `${budget.user_path} ${budget.period_label}` }}>
      <th scope="row" class="subject">{budget.user_path}</th>
      <td>{budget.period_label}</td>
      <SourceCell source={budget.source} declaredIn="the configuration file or SET_BUDGET_* variables" />
      <td>
        <UsageBar label={`Spent, ${name}`} used={budget.spent_usd} reserved={budget.reserved_usd} cap={budget.max_usd} format={formatUsd} />
      </td>
      <td class="muted">
        {budget.period_start.slice(0, 10)} → {budget.period_end.slice(0, 10)}
      </td>
      <td class="countdown">
        <time dateTime={budget.period_end}>{formatCountdown((Date.parse(budget.period_end) - nowMs) / 1000)}</time>
      </td>
      <ActionsCell
        source={budget.source}
        actions={[
          { label: 'Edit', name: `Edit cap of ${name}`, onClick: () => onAction({ kind: 'edit', budget }) },
          { label: 'Delete', name: `Delete ${name}`, danger: true, onClick: () => onAction({ kind: 'delete', budget }) },
        ]}
      />
    </DefinitionRow>
  );
}

function CreateBudget({ onCreated }: { onCreated: (next: BudgetList) => void }) {
  const [userPath, setUserPath] = useState('');
  const [period, setPeriod] = useState<PeriodChoice>('month');
  const [periodSeconds, setPeriodSeconds] = useState('');
  const [maxUsd, setMaxUsd] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    try {
      const limitKey = period === 'custom' ? { period_seconds: numeric(periodSeconds) } : { period };
      onCreated(await api<BudgetList>('PUT', '/admin/budgets', { user_path: userPath, limit_key: limitKey, max_usd: numeric(maxUsd) }));
      setErrors({});
      setUserPath('');
      setMaxUsd('');
    } catch (err) {
      setErrors(fieldErrors(err, BUDGET_PARAMS));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" aria-labelledby="create-budget-title" onSubmit={submit} noValidate>
      <h2 id="create-budget-title">Create a budget</h2>
      <p class="muted">Writing a budget whose user path and period already exist changes its cap; its spend is kept.</p>
      <div class="rule-fields">
        <Field id="budget-user-path" label="User path" error={errors.userPath} hint="The budget covers this path and everything below it, in one total.">
          {(a11y) => <input {...a11y} type="text" value={userPath} autocomplete="off" spellcheck={false} placeholder="/team" onInput={(e) => setUserPath(e.currentTarget.value)} />}
        </Field>
        <Field id="budget-period" label="Period" error={errors.period}>
          {(a11y) => (
            <select {...a11y} value={period} onChange={(e) => setPeriod(e.currentTarget.value as PeriodChoice)}>
              <option value="day">Day (UTC)</option>
              <option value="week">Week (ISO, from Monday)</option>
              <option value="month">Month (calendar)</option>
              <option value="custom">Custom window</option>
            </select>
          )}
        </Field>
        {period === 'custom' && (
          <Field id="budget-period-seconds" label="Window (seconds)" error={errors.periodSeconds}>
            {(a11y) => <input {...a11y} type="text" inputMode="numeric" value={periodSeconds} onInput={(e) => setPeriodSeconds(e.currentTarget.value)} />}
          </Field>
        )}
        <MaxUsdField id="budget-max-usd" value={maxUsd} error={errors.maxUsd} onInput={setMaxUsd} />
      </div>
      <FormMessage error={errors.form} />
      <button type="submit" class="primary" disabled={busy}>
        Create budget
      </button>
    </form>
  );
}

function MaxUsdField({ id, value, error, onInput }: { id: string; value: string; error: string | undefined; onInput: (value: string) => void }) {
  return (
    <Field id={id} label="Cap (US dollars)" error={error}>
      {(a11y) => <input {...a11y} type="text" inputMode="decimal" value={value} autocomplete="off" placeholder="200" onInput={(e) => onInput(e.currentTarget.value)} />}
    </Field>
  );
}

function EditCapDialog({ budget, onClose, onDone }: { budget: BudgetStatus; onClose: () => void; onDone: (next: BudgetList) => void }) {
  const [maxUsd, setMaxUsd] = useState(String(budget.max_usd));
  const [errors, setErrors] = useState<FieldErrors>({});
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      onDone(await api<BudgetList>('PUT', '/admin/budgets', { user_path: budget.user_path, limit_key: limitKeyOf(budget.period_label), max_usd: numeric(maxUsd) }));
    } catch (err) {
      setErrors(fieldErrors(err, BUDGET_PARAMS));
    }
  };
  return (
    <ChangeDialog title="Edit cap" save="Save cap" error={errors.form} onSubmit={submit} onClose={onClose}>
      <p>The new cap of the {budgetName(budget)} applies at once; the spend so far is kept.</p>
      <MaxUsdField id="edit-max-usd" value={maxUsd} error={errors.maxUsd} onInput={setMaxUsd} />
    </ChangeDialog>
  );
}

/** Shown in place of the page when the gateway answers 503 feature_unavailable. */
export function BudgetsDisabled() {
  return (
    <section aria-labelledby="budgets-off-title">
      <h1 id="budgets-off-title">Budgets are disabled</h1>
      <p>
        This gateway runs with budgets switched off (<code>BUDGETS_ENABLED=false</code>), so there are no spend caps to show. Request costs are still
        recorded; enable budgets in the configuration and restart the gateway to manage them here.
      </p>
    </section>
  );
}
