import { z } from 'zod';
import type { Result } from '../../ratelimit/index.ts';

/**
 * NUL is never part of an id, a name or a path, and PostgreSQL can neither store nor compare a
 * string holding one: every id and name the gateway stores or looks up is refused with it.
 */
export const NUL_REFUSAL = 'must not contain a NUL character (U+0000)';

/** Seconds, a decimal >= 0 with at most three decimals: how long a request may wait for capacity (header or query). */
export const WAIT_SECONDS = /^(\d+(\.\d{1,3})?|\.\d{1,3})$/;

/** The refusal of a NUL in `field`, naming it as every 400 does. */
export function nulRefusal(field: string): string {
  return `${field}: ${NUL_REFUSAL}`;
}

export function hasNul(text: string): boolean {
  return text.includes('\u0000');
}

/** A field a schema's transform refused; `checked` turns it into a zod issue at `path`. */
class FieldIssue extends Error {
  readonly path: readonly PropertyKey[];
  constructor(path: readonly PropertyKey[], message: string) {
    super(message);
    this.path = path;
  }
}

/**
 * The value of an engine Result, or a refusal of the field at `path` (relative to the object being
 * transformed) with the engine's message, which already names the field.
 */
export function valueOf<T>(result: Result<T>, path: readonly PropertyKey[]): T {
  if (!result.ok) throw new FieldIssue(path, result.error);
  return result.value;
}

/** Refuses the field at `path`; `message` names the field itself, as the engine's messages do. */
export function refuse(path: readonly PropertyKey[], message: string): never {
  throw new FieldIssue(path, message);
}

/** The field an engine message begins with (`max_tokens is not allowed ...` → `max_tokens`). */
export function leadingField(message: string): string | undefined {
  return /^[a-z_.]+\b/.exec(message)?.[0];
}

/**
 * A zod transform written as plain code: `build` returns the normalised value or calls
 * `valueOf`/`refuse`, and each refusal becomes a custom issue carrying its path and message.
 */
export function checked<I, O>(build: (input: I) => O): (input: I, ctx: z.core.$RefinementCtx) => O {
  return (input, ctx) => {
    try {
      return build(input);
    } catch (err) {
      if (!(err instanceof FieldIssue)) throw err;
      ctx.issues.push({ code: 'custom', path: [...err.path], message: err.message, input });
      return z.NEVER;
    }
  };
}
