/** Small display helpers shared by the pages. */

const integer = new Intl.NumberFormat('en');

export function formatNumber(value: number): string {
  return integer.format(value);
}

const dollars = new Intl.NumberFormat('en', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6 });

/** `$200.00`, `$1,234.50`, `$0.000123`: cents at least, finer digits when a cost has them. */
export function formatUsd(value: number): string {
  return dollars.format(value);
}

/** `42s`, `3:05`, `1:02:03`, `2d 4h`: how long until a window ends. */
export function formatCountdown(seconds: number): string {
  const s = Math.max(0, Math.ceil(seconds));
  if (s < 60) return `${s}s`;
  const days = Math.floor(s / 86_400);
  if (days > 0) return `${days}d ${Math.floor((s % 86_400) / 3600)}h`;
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, '0')}:${rest}` : `${minutes}:${rest}`;
}

/** `2030-01-02 10:00` in UTC: the gateway's windows and buckets are UTC. */
export function formatUtc(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}

export const SCOPE_LABELS = { user_path: 'User path', provider: 'Provider', model: 'Model' } as const;

/** Request priorities, highest first (X-Floodgate-Priority, a key's max_priority). */
export const PRIORITIES = ['high', 'normal', 'low'] as const;
export const PRIORITY_LABELS = { high: 'High', normal: 'Normal', low: 'Low' } as const;

/**
 * A rule's identity as the gateway compares it (scope, subject case-insensitively with user paths
 * normalised, period): the dashboard must know whether a "move" lands on the rule it started from.
 */
export function ruleIdentity(scope: string, subject: string, periodSeconds: number): string {
  let normalized = subject.trim();
  if (scope === 'user_path') normalized = '/' + normalized.split('/').filter((segment) => segment !== '').join('/');
  return `${scope}\u0000${normalized.toLowerCase()}\u0000${periodSeconds}`;
}

/** Today as YYYY-MM-DD in UTC, shifted by `days`. */
export function utcDay(days = 0): string {
  return new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10);
}
