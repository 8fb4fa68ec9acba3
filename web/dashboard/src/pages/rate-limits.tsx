/**
 * Rate limits: every rule with its live counters (polled every two seconds, countdowns ticking
 * every second), and every change the admin API offers: create, edit caps, move, delete, reset
 * one, reset all.
 */
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { api, type RuleList, type RuleStatus } from '../api.ts';
import { ConfirmDialog, Dialog, Field, FormMessage, ListTable, UsageBar, fieldErrors, type FieldErrors } from '../components/controls.tsx';
import { ActionsCell, ChangeDialog, DefinitionRow, DeleteDialog, SourceCell } from '../components/definitions.tsx';
import { useLiveList } from '../components/live-list.ts';
import { EMPTY_DRAFT, RULE_PARAMS, RuleFields, draftOf, draftPeriodSeconds, putBody, type RuleDraft } from '../components/rule-fields.tsx';
import { SCOPE_LABELS, formatCountdown, ruleIdentity } from '../format.ts';

const POLL_MS = 2000;
/** The children shown under a per-child rule: its busiest. */
const BUSIEST_CHILDREN = 5;
/** The list with each per-child rule's busiest children after it (and its count of active ones). */
const LIST_PATH = `/admin/rate-limits?expand=children&children_limit=${BUSIEST_CHILDREN}`;

type Action =
  | { kind: 'edit' | 'move' | 'delete' | 'reset'; rule: RuleStatus }
  | { kind: 'reset-all' };

/** The body fields that name one rule, for DELETE and reset-one. */
function keyOf(rule: RuleStatus): { scope: string; subject: string } {
  return { scope: rule.scope, subject: rule.subject };
}

function ruleName(rule: RuleStatus): string {
  return `${SCOPE_LABELS[rule.scope].toLowerCase()} ${rule.subject} (${rule.period_label})`;
}

export function RateLimitsPage({ onDisabled }: { onDisabled: () => void }) {
  const { list, loadError, nowMs, show, refresh } = useLiveList<RuleList>(LIST_PATH, POLL_MS, onDisabled);
  const [action, setAction] = useState<Action | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);

  // A change answers the list without children: the next poll brings them back.
  const done = (next: RuleList, message: string) => {
    show(next);
    setAction(undefined);
    setNotice(message);
    void refresh();
  };

  return (
    <section aria-labelledby="rate-limits-title">
      <div class="page-head">
        <h1 id="rate-limits-title">Rate limits</h1>
        <p class="muted live">
          Live: counters refresh every {POLL_MS / 1000} s{list && <> · server time {list.server_time.slice(11, 19)} UTC</>}
        </p>
      </div>
      <p class="notice" role="status">
        {notice ?? ''}
      </p>
      {loadError && <p class="form-error" role="alert">Could not load the rules: {loadError}</p>}
      <RuleTable rules={list?.rate_limits} nowMs={nowMs} onAction={setAction} />
      <div class="toolbar">
        <button type="button" class="danger" onClick={() => setAction({ kind: 'reset-all' })} disabled={!list || list.rate_limits.length === 0}>
          Reset all counters…
        </button>
      </div>
      <CreateRule onCreated={(next) => done(next, 'Rule saved.')} />
      {action?.kind === 'edit' && <EditCapsDialog rule={action.rule} onClose={() => setAction(undefined)} onDone={(next) => done(next, `Caps of ${ruleName(action.rule)} updated; its counters were kept.`)} />}
      {action?.kind === 'move' && <MoveDialog rule={action.rule} onClose={() => setAction(undefined)} onDone={(next, message) => done(next, message)} />}
      {action?.kind === 'delete' && (
        <DeleteDialog
          noun="rule"
          onClose={() => setAction(undefined)}
          run={() => api<RuleList>('DELETE', '/admin/rate-limits', { ...keyOf(action.rule), limit_key: { period_seconds: action.rule.period_seconds } })}
          onDone={(next) => done(next, `Deleted ${ruleName(action.rule)}.`)}
        >
          <p>
            Delete the {ruleName(action.rule)} rule? Its limit stops applying at once and its counters are discarded.
          </p>
        </DeleteDialog>
      )}
      {action?.kind === 'reset' && (
        <ConfirmDialog
          title="Reset counters"
          confirm="Reset counters"
          onClose={() => setAction(undefined)}
          run={() => api<RuleList>('POST', '/admin/rate-limits/reset-one', { ...keyOf(action.rule), period_seconds: action.rule.period_seconds })}
          onDone={(next) => done(next, `Counters of ${ruleName(action.rule)} reset.`)}
        >
          <p>Set the counters of the {ruleName(action.rule)} rule back to zero? The rule itself stays.</p>
        </ConfirmDialog>
      )}
      {action?.kind === 'reset-all' && (
        <ResetAllDialog
          onClose={() => setAction(undefined)}
          onDone={async () => {
            setAction(undefined);
            setNotice('Every counter was reset.');
            await refresh();
          }}
        />
      )}
    </section>
  );
}

interface RuleTableProps {
  rules: RuleStatus[] | undefined;
  /** The gateway's clock, in ms. */
  nowMs: number;
  onAction: (action: Action) => void;
}

const COLUMNS = ['Scope', 'Subject', 'Period', 'Source', 'Requests', 'Tokens', 'In flight', 'Window ends in', 'Actions'];

/** A rule, and a per-child rule's busiest children as the list gave them after it. */
interface ListedRule {
  rule: RuleStatus;
  children: RuleStatus[];
}

/** A record of one child's counter of a per-child rule, not of a rule. */
function isChild(record: RuleStatus): boolean {
  return record.per_child === true && record.user_path !== record.subject;
}

function grouped(records: readonly RuleStatus[]): ListedRule[] {
  const rules: ListedRule[] = [];
  for (const record of records) {
    if (isChild(record) && rules.length > 0) rules[rules.length - 1]!.children.push(record);
    else rules.push({ rule: record, children: [] });
  }
  return rules;
}

function RuleTable({ rules, nowMs, onAction }: RuleTableProps) {
  return (
    <ListTable
      class="rules"
      items={rules === undefined ? undefined : grouped(rules)}
      caption="Rate-limit rules and their live counters"
      columns={COLUMNS}
      empty="No rules yet: create one below."
      row={({ rule, children }) => (
        <Fragment key={ruleIdentity(rule.scope, rule.subject, rule.period_seconds)}>
          <RuleRow rule={rule} nowMs={nowMs} onAction={onAction} />
          {rule.per_child && <ChildrenRow rule={rule} children={children} />}
        </Fragment>
      )}
    />
  );
}

/** Whether a child's counter is at a cap: its next request is refused. */
function refusing(child: RuleStatus): boolean {
  return child.requests_remaining === 0 || child.tokens_remaining === 0;
}

/**
 * Under a per-child rule: its busiest children with their own counters (the rule's row shows the
 * path's own counter only), the ones at a cap marked as refusing.
 */
function ChildrenRow({ rule, children }: { rule: RuleStatus; children: RuleStatus[] }) {
  const name = ruleName(rule);
  const active = rule.active_children ?? children.length;
  const concurrent = rule.period_seconds === 0;
  return (
    <tr class="children" data-children-of={`${rule.scope} ${rule.subject} ${rule.period_label}`}>
      <td colSpan={COLUMNS.length}>
        {children.length === 0 ? (
          <p class="muted">No active child: each child of {rule.subject} gets its own counter with these caps when it sends a request.</p>
        ) : (
          <>
            <p class="muted">
              {active > children.length ? `The ${children.length} busiest of ${active} active children` : `${active} active ${active === 1 ? 'child' : 'children'}`} of {rule.subject}, each
              counted on its own against these caps:
            </p>
            <ul class="child-list" aria-label={`Busiest children of ${name}`}>
              {children.map((child) => (
                <li key={child.user_path} data-child={child.user_path} class={refusing(child) ? 'refusing' : undefined}>
                  <div class="child-head">
                    <span class="subject">{child.user_path}</span>
                    {refusing(child) && <span class="badge refusing">refusing</span>}
                  </div>
                  {concurrent ? (
                    <UsageBar label={`In flight, ${child.user_path}`} used={child.in_flight} cap={child.max_requests} />
                  ) : (
                    <>
                      <UsageBar label={`Requests used, ${child.user_path}`} used={child.requests_used} cap={child.max_requests} />
                      {child.max_tokens !== undefined && <UsageBar label={`Tokens used, ${child.user_path}`} used={child.tokens_used} reserved={child.tokens_reserved} cap={child.max_tokens} />}
                    </>
                  )}
                </li>
              ))}
            </ul>
          </>
        )}
      </td>
    </tr>
  );
}

function RuleRow({ rule, nowMs, onAction }: { rule: RuleStatus; nowMs: number; onAction: (action: Action) => void }) {
  const concurrent = rule.period_seconds === 0;
  const name = ruleName(rule);
  const secondsLeft = rule.window_end === undefined ? undefined : (Date.parse(rule.window_end) - nowMs) / 1000;
  return (
    <DefinitionRow source={rule.source} data={{ 'data-rule': `${rule.scope} ${rule.subject} ${rule.period_label}` }}>
      <td>{SCOPE_LABELS[rule.scope]}</td>
      <th scope="row" class="subject">{rule.subject}</th>
      <td>
        {rule.period_label}
        {rule.per_child && (
          <span class="badge" title="Each direct child of the path has its own counter with these caps; the counters on this row are the path's own, its busiest children's are below">
            {' '}
            per child
          </span>
        )}
      </td>
      <SourceCell source={rule.source} declaredIn="the configuration file or SET_*RATE_LIMIT_* variables" />
      <td>{concurrent ? <span class="muted">—</span> : <UsageBar label={`Requests used, ${name}`} used={rule.requests_used} cap={rule.max_requests} />}</td>
      <td>{concurrent ? <span class="muted">—</span> : <UsageBar label={`Tokens used, ${name}`} used={rule.tokens_used} reserved={rule.tokens_reserved} cap={rule.max_tokens} />}</td>
      <td>{concurrent ? <UsageBar label={`In flight, ${name}`} used={rule.in_flight} cap={rule.max_requests} /> : <span class="muted">—</span>}</td>
      <td class="countdown">{secondsLeft === undefined ? <span class="muted">—</span> : <time dateTime={rule.window_end}>{formatCountdown(secondsLeft)}</time>}</td>
      <ActionsCell
        source={rule.source}
        actions={[
          { label: 'Edit', name: `Edit caps of ${name}`, onClick: () => onAction({ kind: 'edit', rule }) },
          { label: 'Move', name: `Move ${name}`, onClick: () => onAction({ kind: 'move', rule }) },
          { label: 'Reset', name: `Reset counters of ${name}`, allowedOnConfig: true, onClick: () => onAction({ kind: 'reset', rule }) },
          { label: 'Delete', name: `Delete ${name}`, danger: true, onClick: () => onAction({ kind: 'delete', rule }) },
        ]}
      />
    </DefinitionRow>
  );
}

function CreateRule({ onCreated }: { onCreated: (next: RuleList) => void }) {
  const [draft, setDraft] = useState<RuleDraft>(EMPTY_DRAFT);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    try {
      onCreated(await api<RuleList>('PUT', '/admin/rate-limits', putBody(draft)));
      setErrors({});
      setDraft({ ...EMPTY_DRAFT, scope: draft.scope, period: draft.period });
    } catch (err) {
      setErrors(fieldErrors(err, RULE_PARAMS));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" aria-labelledby="create-rule-title" onSubmit={submit} noValidate>
      <h2 id="create-rule-title">Create a rule</h2>
      <p class="muted">Writing a rule whose scope, subject and period already exist updates that rule's caps.</p>
      <RuleFields id="create" draft={draft} errors={errors} onChange={setDraft} />
      <FormMessage error={errors.form} />
      <button type="submit" class="primary" disabled={busy}>
        Create rule
      </button>
    </form>
  );
}

interface RuleDialogProps {
  rule: RuleStatus;
  onClose: () => void;
  onDone: (next: RuleList, message: string) => void;
}

function EditCapsDialog({ rule, onClose, onDone }: RuleDialogProps) {
  const [draft, setDraft] = useState<RuleDraft>(draftOf(rule));
  const [errors, setErrors] = useState<FieldErrors>({});
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      onDone(await api<RuleList>('PUT', '/admin/rate-limits', putBody(draft)), '');
    } catch (err) {
      setErrors(fieldErrors(err, RULE_PARAMS));
    }
  };
  return (
    <ChangeDialog title="Edit caps" save="Save caps" error={errors.form} onSubmit={submit} onClose={onClose}>
      <p>New caps apply at once; the rule keeps its counters. Leave a cap empty to remove it.</p>
      <RuleFields id="edit" draft={draft} errors={errors} onChange={setDraft} capsOnly />
    </ChangeDialog>
  );
}

/**
 * A move is a PUT of the new key, then a DELETE of the old one: the rule under its new key starts
 * with fresh counters. When the "new" key is the same rule (a respelling), it is only a PUT.
 */
function MoveDialog({ rule, onClose, onDone }: RuleDialogProps) {
  const [draft, setDraft] = useState<RuleDraft>(draftOf(rule));
  const [errors, setErrors] = useState<FieldErrors>({});
  const sameKey = ruleIdentity(draft.scope, draft.subject, draftPeriodSeconds(draft)) === ruleIdentity(rule.scope, rule.subject, rule.period_seconds);
  // Turning per_child on or off keeps the key, but the gateway moves the rule: its counters restart.
  const sameRule = sameKey && (draft.scope === 'user_path' && draft.perChild) === (rule.per_child === true);
  const submit = async (event: Event) => {
    event.preventDefault();
    let written: RuleList;
    try {
      written = await api<RuleList>('PUT', '/admin/rate-limits', putBody(draft));
    } catch (err) {
      setErrors(fieldErrors(err, RULE_PARAMS));
      return;
    }
    if (sameRule) return onDone(written, `Updated ${ruleName(rule)}; its counters were kept.`);
    if (sameKey) return onDone(written, `Moved ${ruleName(rule)}: per child changed, so its counters start again.`);
    try {
      const next = await api<RuleList>('DELETE', '/admin/rate-limits', { ...keyOf(rule), limit_key: { period_seconds: rule.period_seconds } });
      onDone(next, `Moved ${ruleName(rule)}: the rule under its new key starts with fresh counters.`);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      setErrors({ form: `The new rule was written, but deleting the old one failed (${message}): both now exist.` });
    }
  };
  return (
    <ChangeDialog title="Move rule" save={sameRule ? 'Save' : 'Move rule (counters restart)'} saveDescribedBy="move-warning" error={errors.form} onSubmit={submit} onClose={onClose}>
      <p>Change the scope, subject, period or per-child counting of {ruleName(rule)}.</p>
      <RuleFields id="move" draft={draft} errors={errors} onChange={setDraft} />
      <p class="warning" id="move-warning">
        {sameRule
          ? 'This is the same rule (same scope, subject and period): saving keeps its counters.'
          : sameKey
            ? 'Turning per child on or off moves the rule: its counters (and its children\'s) restart at zero, and the traffic counted so far is forgotten.'
            : 'Moving writes a new rule under the new key and then deletes the old one: the counters restart at zero, and the traffic counted so far is forgotten.'}
      </p>
    </ChangeDialog>
  );
}

function ResetAllDialog({ onClose, onDone }: { onClose: () => void; onDone: () => void }) {
  const [typed, setTyped] = useState('');
  const [errors, setErrors] = useState<FieldErrors>({});
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      await api('POST', '/admin/rate-limits/reset', { confirmation: typed });
      onDone();
    } catch (err) {
      setErrors(fieldErrors(err, { confirmation: 'confirmation' }));
    }
  };
  return (
    <Dialog title="Reset every counter" onClose={onClose}>
      <form onSubmit={submit} noValidate>
        <p>
          This sets the counters of <strong>every</strong> rule back to zero, config rules included. The rules stay. Type <code>reset</code> to confirm.
        </p>
        <Field id="reset-all-confirmation" label="Type reset to confirm" error={errors.confirmation}>
          {(a11y) => <input {...a11y} type="text" value={typed} autocomplete="off" spellcheck={false} onInput={(e) => setTyped(e.currentTarget.value)} />}
        </Field>
        <FormMessage error={errors.form} />
        <div class="dialog-buttons">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" class="danger" disabled={typed.trim() !== 'reset'}>
            Reset all counters
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/** Shown in place of the page when the gateway answers 503 feature_unavailable. */
export function RateLimitsDisabled() {
  return (
    <section aria-labelledby="rate-limits-off-title">
      <h1 id="rate-limits-off-title">Rate limits are disabled</h1>
      <p>
        This gateway runs with rate limits switched off (<code>RATE_LIMITS_ENABLED=false</code>), so there are no rules or counters to show. Enable them in
        the configuration and restart the gateway to manage them here.
      </p>
    </section>
  );
}
