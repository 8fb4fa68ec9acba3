import type { z } from 'zod';
import { formatPath } from './errors.ts';
import type { UnsetReference } from './interpolate.ts';

export interface FormatOptions {
  /** Roots the paths (e.g. at an env variable name). */
  prefix?: readonly PropertyKey[];
  /** Adds the name of an unset `${VAR}` to errors on the value it emptied. */
  unset?: ReadonlyMap<string, UnsetReference>;
  /** Where a key path sits in the config file (`file:line:column`), when it does. */
  locate?: (path: readonly PropertyKey[], key: boolean) => string | undefined;
  /** A known key close to an unknown one at `path`. */
  suggest?: (path: readonly PropertyKey[], key: string) => string | undefined;
}

/** Turns zod issues into `key.path: message` lines, each after its place in the file when known. */
export function formatIssues(issues: readonly z.core.$ZodIssue[], options: FormatOptions = {}): string[] {
  const lines: string[] = [];
  const at = (path: readonly PropertyKey[], key: boolean): string => {
    const place = options.locate?.(path, key);
    return place === undefined ? '' : `${place}: `;
  };
  for (const issue of issues) {
    const path = [...(options.prefix ?? []), ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) {
        const known = options.suggest?.(issue.path, key);
        lines.push(`${at([...path, key], true)}${formatPath([...path, key])}: unknown key${known === undefined ? '' : ` (did you mean "${known}"?)`}`);
      }
      continue;
    }
    const message = issue.code === 'invalid_key' ? (issue.issues[0]?.message ?? issue.message) : issue.message;
    const where = formatPath(path);
    const vars = options.unset?.get(where)?.names;
    const note = vars ? ` (${vars.map((v) => `\${${v}}`).join(', ')} is not set)` : '';
    lines.push(`${at(path, false)}${where}: ${message}${note}`);
  }
  return lines;
}
