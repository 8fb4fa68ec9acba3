/**
 * Name rules specific to configuration. Subject normalisation (user paths, provider and model
 * subjects) comes from the rate-limit engine's `src/ratelimit/normalize.ts`, so config seeds and
 * admin writes agree on rule identity.
 */

/** Provider instance names: usable in `provider/model` strings and URLs, so no `/` or whitespace. */
const PROVIDER_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Returns an error message for an invalid provider instance name, or null when it is valid. */
export function providerNameError(name: string): string | null {
  if (PROVIDER_NAME_RE.test(name)) return null;
  return `invalid provider name "${name}": use letters, digits, ".", "_" and "-" (no "/" or whitespace), starting with a letter or digit`;
}
