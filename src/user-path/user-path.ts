/**
 * The user path: a consumer's hierarchical identity (`/team/alice`). Rules, budgets, files,
 * batches and usage all ask the same few questions of it — what is its canonical spelling, is it
 * under another, which paths govern it, which child of a path it belongs to — and the answers live
 * here, once. Matching is case-insensitive everywhere (ASCII lowercase), as the specification says.
 */
import { fail, ok, type Result } from '../shared/result.ts';

// Control characters can't travel in an HTTP header and would let two different strings collide
// with the engine's internal key separators, so they are refused.
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;
const NON_ASCII = /[^\u0000-\u007f]/;

/**
 * Canonical user path: trimmed, leading `/`, empty segments dropped (`team//a/` → `/team/a`),
 * empty → `/`. `.`/`..` segments and `:` are refused rather than resolved, because a path is an
 * identity, not a filesystem location. Non-ASCII text is put in Unicode NFC, so `é` typed as one
 * code point or as `e` plus an accent is the same path wherever it comes from (header, key
 * binding, admin API, config).
 */
export function normalizeUserPath(raw: unknown, field = 'user_path'): Result<string> {
  if (typeof raw !== 'string') return fail(`${field} must be a string`);
  const trimmed = NON_ASCII.test(raw) ? raw.trim().normalize('NFC') : raw.trim();
  if (CONTROL_CHARS.test(trimmed)) return fail(`${field} must not contain control characters`);
  if (trimmed.includes(':')) return fail(`${field} must not contain ':'`);
  const segments: string[] = [];
  for (const segment of trimmed.split('/')) {
    if (segment === '') continue;
    if (segment === '.' || segment === '..') return fail(`${field} must not contain '.' or '..' segments`);
    segments.push(segment);
  }
  return ok('/' + segments.join('/'));
}

/**
 * Whether `path` is `ancestor` or lies below it, case-insensitively: `/a` covers `/a` and `/a/b`,
 * not `/ab`; `/` covers everything. Both are normalised paths.
 */
export function isUnder(path: string, ancestor: string): boolean {
  if (ancestor === '/') return true;
  const p = path.toLowerCase();
  const a = ancestor.toLowerCase();
  return p === a || (p.length > a.length && p.startsWith(a) && p.charCodeAt(a.length) === 47 /* '/' */);
}

/** Calls `visit` with every path governing `lowerPath`, from the root down to the path itself (`/`, `/team`, `/team/alice`). */
export function forEachAncestor(lowerPath: string, visit: (path: string) => void): void {
  visit('/');
  if (lowerPath === '/') return;
  for (let slash = lowerPath.indexOf('/', 1); slash !== -1; slash = lowerPath.indexOf('/', slash + 1)) visit(lowerPath.slice(0, slash));
  visit(lowerPath);
}

/**
 * The direct child of `lowerParent` that `lowerPath` lies in (`alice` for `/team/alice/x` under
 * `/team`); undefined for the parent itself. Both lowercase, and `lowerPath` under `lowerParent`.
 */
export function directChild(lowerParent: string, lowerPath: string): string | undefined {
  if (lowerPath.length <= lowerParent.length) return undefined;
  const start = lowerParent === '/' ? 1 : lowerParent.length + 1;
  const end = lowerPath.indexOf('/', start);
  return end === -1 ? lowerPath.slice(start) : lowerPath.slice(start, end);
}

/**
 * A subtree as SQL selects it: the path itself (`exact`, compared case-insensitively) and a LIKE
 * pattern for everything below it (`below`, with LIKE's metacharacters escaped by `\`; `_` and `%`
 * are legal in paths); undefined for the root, which covers every path. A trailing slash is
 * dropped, so `/a/` selects what `/a` does.
 */
export function subtreeMatch(prefix: string): { exact: string; below: string } | undefined {
  const trimmed = prefix.trim().replace(/\/+$/, '');
  if (trimmed === '') return undefined;
  return { exact: trimmed, below: `${trimmed.replace(/[\\%_]/g, (ch) => `\\${ch}`)}/%` };
}
