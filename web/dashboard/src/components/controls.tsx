/** Form controls, dialogs and meters shared by the pages, accessible by construction. */
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api.ts';
import { formatNumber } from '../format.ts';

/** Errors of one form, by field name; `form` holds what belongs to no single field. */
export type FieldErrors = Record<string, string | undefined>;

/**
 * Where an API error goes: beside the field its `param` names (`fields` maps the API's parameter
 * names to the form's fields), else at the top of the form.
 */
export function fieldErrors(err: unknown, fields: Readonly<Record<string, string>>): FieldErrors {
  if (!(err instanceof ApiError)) return { form: err instanceof Error ? err.message : String(err) };
  const field = err.param === null ? undefined : fields[err.param];
  return field !== undefined ? { [field]: err.message } : { form: err.message };
}

interface FieldProps {
  /** The form's id prefix plus the field name make the input's id, so labels and errors are tied to it. */
  id: string;
  label: string;
  error?: string | undefined;
  hint?: string;
  children: (props: { id: string; 'aria-invalid': boolean; 'aria-describedby': string | undefined }) => ComponentChildren;
}

/**
 * A labelled control with its error message right beside it: the message is tied to the control
 * (aria-describedby) and announced when it appears.
 */
export function Field({ id, label, error, hint, children }: FieldProps) {
  const described = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div class={error ? 'field invalid' : 'field'}>
      <label for={id}>{label}</label>
      {children({ id, 'aria-invalid': error !== undefined, 'aria-describedby': described })}
      {hint && <small id={`${id}-hint`} class="hint">{hint}</small>}
      <span id={`${id}-error`} class="field-error" role="alert">
        {error ?? ''}
      </span>
    </div>
  );
}

/** A form-level message (errors no field owns, or a success note). */
export function FormMessage({ error }: { error: string | undefined }) {
  return (
    <p class="form-error" role="alert">
      {error ?? ''}
    </p>
  );
}

interface DialogProps {
  title: string;
  onClose: () => void;
  children: ComponentChildren;
}

/** A modal dialog (native <dialog>: focus stays inside, Escape closes it). */
export function Dialog({ title, onClose, children }: DialogProps) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  const titleId = `dialog-${title.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <dialog ref={ref} aria-labelledby={titleId} onClose={onClose} onCancel={onClose}>
      <h2 id={titleId}>{title}</h2>
      {children}
    </dialog>
  );
}

interface ConfirmDialogProps<T> {
  title: string;
  /** The confirming button's label. */
  confirm: string;
  /** What is about to happen, in words. */
  children: ComponentChildren;
  run: () => Promise<T>;
  onClose: () => void;
  onDone: (result: T) => void;
}

/** Asks before a destructive action; the API's error, if any, is shown in the dialog. */
export function ConfirmDialog<T>({ title, confirm, children, run, onClose, onDone }: ConfirmDialogProps<T>) {
  const [error, setError] = useState<string | undefined>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    try {
      onDone(await run());
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <Dialog title={title} onClose={onClose}>
      <form onSubmit={submit}>
        {children}
        <FormMessage error={error} />
        <div class="dialog-buttons">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" class="danger">{confirm}</button>
        </div>
      </form>
    </Dialog>
  );
}

interface UsageBarProps {
  label: string;
  used: number;
  cap: number | undefined;
  /**
   * What running requests reserved on top of `used` (reservations on): drawn after it in a
   * hatched part of its own, and counted as taken in what is left.
   */
  reserved?: number | undefined;
  /** How the numbers are written; counts by default. */
  format?: (value: number) => string;
}

/** used / cap as a bar with the numbers written out (colour is never the only signal). */
export function UsageBar({ label, used, cap, reserved = 0, format = formatNumber }: UsageBarProps) {
  if (cap === undefined) return <span class="muted">—</span>;
  const ratio = cap > 0 ? used / cap : 0;
  const taken = cap > 0 ? (used + reserved) / cap : 0;
  const level = taken >= 1 ? 'full' : taken >= 0.75 ? 'high' : 'ok';
  const remaining = Math.max(cap - used - reserved, 0);
  const usedWidth = Math.min(ratio, 1) * 100;
  const reservedWidth = Math.min(taken, 1) * 100 - usedWidth;
  return (
    <div class="usage">
      <div
        class={`bar ${level}`}
        role="meter"
        aria-label={label}
        aria-valuemin={0}
        aria-valuemax={cap}
        aria-valuenow={Math.min(used, cap)}
        aria-valuetext={`${format(used)} of ${format(cap)} used, ${reserved > 0 ? `${format(reserved)} reserved, ` : ''}${format(remaining)} left`}
      >
        <span style={{ width: `${usedWidth}%` }} />
        {reserved > 0 && <span class="reserved" style={{ width: `${reservedWidth}%` }} />}
      </div>
      <span class="usage-numbers">
        {format(used)} / {format(cap)} <span class="muted">· {reserved > 0 && `${format(reserved)} reserved · `}{format(remaining)} left</span>
      </span>
    </div>
  );
}

interface ListTableProps<T> {
  /** Undefined while the first answer is loading. */
  items: readonly T[] | undefined;
  /** Read by screen readers only. */
  caption: string;
  columns: readonly string[];
  empty: string;
  /** One `<tr>` an item. */
  row: (item: T) => ComponentChildren;
  /** The table's class (the live-counter tables share one). */
  class?: string;
}

/** A list of records as a table: loading and empty states, a hidden caption, one header row. */
export function ListTable<T>({ items, caption, columns, empty, row, class: className }: ListTableProps<T>) {
  if (items === undefined) return <p class="muted">Loading…</p>;
  if (items.length === 0) return <p class="empty">{empty}</p>;
  return (
    <div class="table-wrap">
      <table class={className}>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((column) => (
              <th key={column} scope="col">
                {column}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{items.map(row)}</tbody>
      </table>
    </div>
  );
}
