/** Small readers for untyped JSON bodies; the translators never trust a field's type. */
import { isRecord } from '../../shared/json.ts';

export type Json = Record<string, unknown>;

export function obj(v: unknown): Json | undefined {
  return isRecord(v) ? v : undefined;
}

export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

export function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** Copies the listed keys that are present (not undefined) from `from` to `to`. */
export function copyKeys(from: Json, to: Json, keys: readonly string[]): void {
  for (const k of keys) if (from[k] !== undefined) to[k] = from[k];
}

export function parseJsonObject(text: string): Json | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return isRecord(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
