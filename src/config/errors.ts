/**
 * Every configuration problem found in one pass, so an operator fixes them all at once instead of
 * restarting once per mistake. Each entry names the key path or the environment variable.
 */
export class ConfigError extends Error {
  readonly errors: string[];
  /** What was found worth a warning on the way (unset variables...), for `check-config` to show too. */
  readonly warnings: string[];

  constructor(errors: string[], warnings: string[] = []) {
    super(
      errors.length === 1
        ? `invalid configuration: ${errors[0]}`
        : `invalid configuration (${errors.length} errors):\n  ${errors.join('\n  ')}`,
    );
    this.name = 'ConfigError';
    this.errors = errors;
    this.warnings = warnings;
  }
}

/** Renders a key path the way it appears in error messages: `a.b[0].c`, odd keys quoted. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else {
      const key = String(part);
      // Map keys such as provider names or `provider/model` strings stay readable when plain.
      if (/^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$/.test(key)) out += out === '' ? key : `.${key}`;
      else out += `[${JSON.stringify(key)}]`;
    }
  }
  return out === '' ? '(root)' : out;
}
