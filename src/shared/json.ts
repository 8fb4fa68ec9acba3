/** A parsed JSON value that is an object: not null, not an array. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** How deep the objects and arrays of a JSON document the gateway reads may nest. */
export const MAX_JSON_DEPTH = 64;

/** Whether objects and arrays nest more than `limit` levels; stops at the limit, so it cannot recurse deeply itself. */
export function nestsDeeperThan(value: unknown, limit: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (limit === 0) return true;
  const children = Array.isArray(value) ? value : Object.values(value);
  for (const child of children) if (nestsDeeperThan(child, limit - 1)) return true;
  return false;
}
