/**
 * `${VAR}` / `${VAR:-default}` interpolation, applied to string scalars of the already-parsed YAML
 * tree. Working on parsed values (not the raw text) means an environment value can never inject
 * YAML structure: `${X}` with X="a: b" stays the string "a: b". Map keys are not interpolated; they
 * are names (providers, aliases), not values. `$${` writes a literal `${`.
 *
 * Decision on unset variables: `${VAR}` with VAR unset and no default resolves to an empty string
 * rather than an error, and the schema treats empty optional scalars as absent. That makes the
 * documented `master_key: ${MASTER_KEY}` mean "no master key" when MASTER_KEY is unset, and
 * `api_key: ${OPENAI_API_KEY}` fine for a local server without keys. Every unset variable is
 * reported in `unset`: the loader warns about each one, naming it, and where an empty value is not
 * acceptable (a required field) annotates the schema error with its name instead.
 */
import { formatPath } from './errors.ts';

export type Env = Readonly<Record<string, string | undefined>>;

/** A value that named variables which are not set (and had no default). */
export interface UnsetReference {
  readonly path: readonly PropertyKey[];
  readonly names: readonly string[];
  /** The whole value was the one reference (`${MASTER_KEY}`), so the key counts as absent; else the names were left out of a longer string. */
  readonly whole: boolean;
}

interface InterpolationResult {
  value: unknown;
  errors: string[];
  /** Formatted key path → the unset variables of that value. */
  unset: Map<string, UnsetReference>;
}

interface StringResult {
  value: string;
  unset: string[];
  /** True when the whole scalar was one reference, e.g. `${MASTER_KEY}`. */
  whole: boolean;
  error?: string;
}

const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-([\s\S]*))?$/;

/** Interpolates one string; never throws, reports a syntax problem in `error`. */
function interpolateString(input: string, env: Env): StringResult {
  let out = '';
  const unset: string[] = [];
  let references = 0;
  let i = 0;
  while (i < input.length) {
    if (input.startsWith('$${', i)) {
      out += '${';
      i += 3;
      continue;
    }
    if (!input.startsWith('${', i)) {
      out += input[i];
      i += 1;
      continue;
    }
    const end = input.indexOf('}', i + 2);
    if (end === -1) return { value: input, unset, whole: false, error: `unterminated "\${" in "${input}"` };
    const inner = input.slice(i + 2, end);
    const m = REFERENCE.exec(inner);
    if (!m) {
      return {
        value: input,
        unset,
        whole: false,
        error: `invalid reference "\${${inner}}" (expected \${VAR} or \${VAR:-default})`,
      };
    }
    const name = m[1] as string;
    const fallback = m[2];
    const actual = env[name];
    references += 1;
    if (fallback !== undefined && (actual === undefined || actual === '')) out += fallback;
    else if (actual === undefined) unset.push(name);
    else out += actual;
    i = end + 1;
  }
  const whole = references === 1 && /^\$\{[^}]*\}$/.test(input);
  return { value: out, unset, whole };
}

/** Interpolates every string scalar of a parsed YAML tree (a fresh tree is returned). */
export function interpolate(tree: unknown, env: Env): InterpolationResult {
  const result: InterpolationResult = { value: undefined, errors: [], unset: new Map() };
  result.value = walk(tree, [], env, result);
  return result;
}

function walk(node: unknown, path: PropertyKey[], env: Env, acc: InterpolationResult): unknown {
  if (typeof node === 'string') {
    const r = interpolateString(node, env);
    const where = formatPath(path);
    if (r.error !== undefined) acc.errors.push(`${where}: ${r.error}`);
    if (r.unset.length > 0) acc.unset.set(where, { path, names: r.unset, whole: r.whole });
    return r.value;
  }
  if (Array.isArray(node)) return node.map((item, i) => walk(item, [...path, i], env, acc));
  if (node !== null && typeof node === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node)) {
      // defineProperty: a YAML key named `__proto__` must stay a plain (and then unknown) key.
      Object.defineProperty(out, key, { value: walk(value, [...path, key], env, acc), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return node;
}
