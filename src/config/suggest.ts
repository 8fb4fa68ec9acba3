/**
 * "did you mean" for an unknown configuration key: the keys the schema knows at that place (found
 * by walking the zod schema along the key path, with the input that failed to pick a provider's
 * variant by its `type`), and the one closest to the unknown key.
 */
import type { z } from 'zod';

type Schema = z.core.$ZodType;

/** The closest known key to `key` at `path`, when one is close enough to be a likely typo. */
export function suggestKey(schema: Schema, path: readonly PropertyKey[], input: unknown, key: string): string | undefined {
  return closest(key, knownKeysAt(schema, path, input));
}

/** The keys the object schema(s) at `path` accept. */
export function knownKeysAt(schema: Schema, path: readonly PropertyKey[], input: unknown): string[] {
  let nodes = resolve([schema], input);
  let value = input;
  for (const segment of path) {
    value = isRecord(value) || Array.isArray(value) ? (value as Record<PropertyKey, unknown>)[segment] : undefined;
    nodes = resolve(nodes.flatMap((node) => child(node, segment)), value);
  }
  return [...new Set(nodes.flatMap((node) => (node._zod.def.type === 'object' ? Object.keys((node._zod.def as z.core.$ZodObjectDef).shape) : [])))];
}

/**
 * The closest candidate by edit distance (a swap of two neighbours counts as one edit), if it is
 * within a third of the key's length (at least one edit, at most three).
 */
export function closest(key: string, candidates: readonly string[]): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(key.length / 3)));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of candidates) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and adjacent swaps. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    rows.push([i]);
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        rows[0]!.push(j);
        continue;
      }
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]!.push(d);
    }
  }
  return rows[a.length]![b.length]!;
}

/** The schemas a value meets after the wrappers (optional, default, preprocess, ...) and unions. */
function resolve(nodes: readonly Schema[], value: unknown): Schema[] {
  const out: Schema[] = [];
  const queue = [...nodes];
  for (let node = queue.shift(); node !== undefined; node = queue.shift()) {
    const def = node._zod.def as z.core.$ZodTypeDef & Record<string, unknown>;
    switch (def.type) {
      case 'optional':
      case 'nullable':
      case 'default':
      case 'prefault':
      case 'readonly':
      case 'catch':
      case 'nonoptional':
        queue.push(def.innerType as Schema);
        break;
      case 'pipe': {
        // z.preprocess(fn, schema) runs a transform into the schema; schema.transform(fn) the other way.
        const { in: first, out: second } = def as unknown as { in: Schema; out: Schema };
        queue.push(second._zod.def.type === 'transform' ? first : second);
        break;
      }
      case 'lazy':
        queue.push((def as unknown as { getter: () => Schema }).getter());
        break;
      case 'union': {
        const options = def.options as Schema[];
        const discriminator = def.discriminator as string | undefined;
        const chosen = discriminator === undefined || !isRecord(value) ? [] : options.filter((option) => acceptsValue(option, discriminator, value[discriminator]));
        queue.push(...(chosen.length > 0 ? chosen : options));
        break;
      }
      default:
        out.push(node);
    }
  }
  return out;
}

function child(node: Schema, segment: PropertyKey): Schema[] {
  const def = node._zod.def as z.core.$ZodTypeDef & Record<string, unknown>;
  if (def.type === 'object') {
    const field = (def.shape as Record<string, Schema>)[String(segment)];
    return field === undefined ? [] : [field];
  }
  if (def.type === 'record') return [def.valueType as Schema];
  if (def.type === 'array' && typeof segment === 'number') return [def.element as Schema];
  return [];
}

/** Whether a discriminated union's option takes this value of its discriminator (a literal field). */
function acceptsValue(option: Schema, discriminator: string, value: unknown): boolean {
  for (const node of resolve([option], undefined)) {
    const def = node._zod.def;
    if (def.type !== 'object') continue;
    const field = (def as z.core.$ZodObjectDef).shape[discriminator];
    if (field === undefined) continue;
    for (const literal of resolve([field], value)) {
      const values = (literal._zod.def as { values?: unknown[] }).values;
      if (values?.includes(value)) return true;
    }
  }
  return false;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
