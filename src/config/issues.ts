import type { z } from 'zod';
import { formatPath } from './errors.ts';

/**
 * Turns zod issues into `key.path: message` lines. `prefix` roots the paths (e.g. at an env
 * variable name); `unset` adds the name of an unset `${VAR}` to errors on the value it emptied.
 */
export function formatIssues(
  issues: readonly z.core.$ZodIssue[],
  prefix: readonly PropertyKey[] = [],
  unset?: ReadonlyMap<string, readonly string[]>,
): string[] {
  const lines: string[] = [];
  for (const issue of issues) {
    const path = [...prefix, ...issue.path];
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) lines.push(`${formatPath([...path, key])}: unknown key`);
      continue;
    }
    const message = issue.code === 'invalid_key' ? (issue.issues[0]?.message ?? issue.message) : issue.message;
    const where = formatPath(path);
    const vars = unset?.get(where);
    const note = vars ? ` (${vars.map((v) => `\${${v}}`).join(', ')} is not set)` : '';
    lines.push(`${where}: ${message}${note}`);
  }
  return lines;
}
