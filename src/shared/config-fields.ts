/**
 * zod building blocks for configuration values, shared by the config file's schema and the
 * provider types' own settings. Values arrive after `${VAR}` interpolation, so empty strings and
 * YAML nulls mean "absent", and a number where text is expected is taken as text.
 */
import { z } from 'zod';

export const isAbsent = (v: unknown): boolean => v === undefined || v === null || v === '';

// A number where a string is expected (`master_key: 123456`) is almost surely meant as text.
export function coerceString(v: unknown): unknown {
  if (isAbsent(v)) return undefined;
  return typeof v === 'number' ? String(v) : v;
}

const BOOLEAN_WORDS: Record<string, boolean> = {
  true: true, false: false, '1': true, '0': false, yes: true, no: false, on: true, off: false,
};

/** Parses true/false/1/0/yes/no/on/off (case-insensitive); undefined for anything else. */
export function parseBoolean(raw: string): boolean | undefined {
  return BOOLEAN_WORDS[raw.trim().toLowerCase()];
}

export function coerceBool(v: unknown): unknown {
  if (isAbsent(v)) return undefined;
  return typeof v === 'string' ? (parseBoolean(v) ?? v) : v;
}

/** A boolean with a default, written as true/false/yes/no/on/off/1/0. */
export const booleanSetting = (def: boolean) =>
  z.preprocess(coerceBool, z.boolean({ error: 'must be a boolean (true/false/yes/no/on/off/1/0)' }).default(def));

export const str = () => z.string({ error: (iss) => (iss.input === undefined ? 'required' : 'must be a string') });

/** An http(s) URL with its trailing slashes dropped (paths are appended to it). */
function httpUrl(v: string, ctx: z.RefinementCtx): string {
  let url: URL | undefined;
  try {
    url = new URL(v);
  } catch {
    // reported below
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    ctx.addIssue({ code: 'custom', message: `must be an http(s) URL (got "${v}")` });
    return z.NEVER;
  }
  return v.replace(/\/+$/, '');
}

/** A required http(s) URL. */
export const urlSetting = () => z.preprocess(coerceString, str().transform(httpUrl));

/** An http(s) URL that may be left out. */
export const optionalUrlSetting = () => z.preprocess(coerceString, str().transform(httpUrl).optional());

/** An http(s) URL with a default, then `normalize`d. */
export const defaultUrlSetting = (fallback: string, normalize: (url: string) => string = (url) => url) =>
  z.preprocess(coerceString, str().default(fallback).transform(httpUrl).transform(normalize));
