/**
 * What the rate-limit and budget pages share: both list definitions that are either declared in the
 * configuration (re-seeded at every start, so read-only here) or written through the admin API, one
 * row each with its source and its actions, edited and deleted through the same dialogs.
 */
import type { ComponentChildren } from 'preact';
import { ConfirmDialog, Dialog, FormMessage } from './controls.tsx';

export type Source = 'config' | 'manual';

/** Why a change is not offered on a config definition. */
const LOCKED = 'Declared in the configuration: change it there';

interface DefinitionRowProps {
  source: Source;
  /** The attribute naming the row, such as `{ 'data-budget': '/team month' }`. */
  data: Record<`data-${string}`, string>;
  children: ComponentChildren;
}

/** One definition's `<tr>`, shaded when it comes from the configuration. */
export function DefinitionRow({ source, data, children }: DefinitionRowProps) {
  return (
    <tr {...data} class={source === 'config' ? 'from-config' : undefined}>
      {children}
    </tr>
  );
}

/** The source cell: "config · read-only" (saying where such a definition is declared) or "manual". */
export function SourceCell({ source, declaredIn }: { source: Source; declaredIn: string }) {
  return (
    <td>
      {source === 'config' ? (
        <span class="badge config" title={`Declared in ${declaredIn}; re-seeded at every start`}>
          config · read-only
        </span>
      ) : (
        <span class="badge">manual</span>
      )}
    </td>
  );
}

export interface RowAction {
  /** The button's text. */
  label: string;
  /** Its accessible name, naming the definition (`Delete month budget of /team`). */
  name: string;
  onClick: () => void;
  /** A change of the definition itself is not offered on a config one; this action is (it touches counters only). */
  allowedOnConfig?: boolean;
  danger?: boolean;
}

/** The actions cell: a button each, the ones that would change a config definition disabled, saying why. */
export function ActionsCell({ source, actions }: { source: Source; actions: readonly RowAction[] }) {
  return (
    <td class="actions">
      {actions.map((action) => {
        const locked = source === 'config' && action.allowedOnConfig !== true;
        return (
          <button
            key={action.label}
            type="button"
            class={action.danger === true ? 'danger' : undefined}
            disabled={locked}
            title={locked ? LOCKED : undefined}
            aria-label={action.name}
            onClick={action.onClick}
          >
            {action.label}
          </button>
        );
      })}
    </td>
  );
}

interface ChangeDialogProps {
  title: string;
  /** The saving button's label. */
  save: string;
  /** The id of a warning the saving button refers to. */
  saveDescribedBy?: string;
  /** The error no field owns. */
  error: string | undefined;
  onSubmit: (event: Event) => void;
  onClose: () => void;
  /** The explanation and the fields. */
  children: ComponentChildren;
}

/** A dialog with a form that changes one definition: its fields, its form-level error, Cancel and save. */
export function ChangeDialog({ title, save, saveDescribedBy, error, onSubmit, onClose, children }: ChangeDialogProps) {
  return (
    <Dialog title={title} onClose={onClose}>
      <form onSubmit={onSubmit} noValidate>
        {children}
        <FormMessage error={error} />
        <div class="dialog-buttons">
          <button type="button" onClick={onClose}>Cancel</button>
          <button type="submit" class="primary" aria-describedby={saveDescribedBy}>
            {save}
          </button>
        </div>
      </form>
    </Dialog>
  );
}

interface DeleteDialogProps<T> {
  /** The kind of definition: "rule", "budget". */
  noun: string;
  run: () => Promise<T>;
  onClose: () => void;
  onDone: (result: T) => void;
  /** What deleting it does, in words. */
  children: ComponentChildren;
}

/** Asks before deleting one definition. */
export function DeleteDialog<T>({ noun, run, onClose, onDone, children }: DeleteDialogProps<T>) {
  return (
    <ConfirmDialog title={`Delete ${noun}`} confirm={`Delete ${noun}`} run={run} onClose={onClose} onDone={onDone}>
      {children}
    </ConfirmDialog>
  );
}

/** A form's number as a number when it reads as one; the gateway judges the rest and names the field. */
export function numeric(text: string): number | string {
  const value = Number(text);
  return text.trim() !== '' && Number.isFinite(value) ? value : text;
}
