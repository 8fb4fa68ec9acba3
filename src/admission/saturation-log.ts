/**
 * The log lines of targets saturated by what was learned from their provider's answers: one when a
 * target enters its cooldown (its provider refused, or its own limit is spent), one when it leaves
 * it, as far as this gateway knows (another replica may learn more meanwhile).
 */
import type { LearnedCause } from '../ratelimit/index.ts';
import type { SaturationListener } from './core.ts';

export interface SaturationLogger {
  info(fields: Record<string, unknown>, message: string): void;
}

const REASONS: Readonly<Record<LearnedCause, string>> = {
  cooldown: 'the provider refused (429, or 503 with a retry-after)',
  requests: "the provider's own request limit is spent",
  tokens: "the provider's own token limit is spent",
};

export class SaturationLog implements SaturationListener {
  readonly #logger: SaturationLogger;
  readonly #now: () => number;
  /** Targets in their cooldown, by `provider/model`: until when, and the timer of the line that says it ended. */
  readonly #cooling = new Map<string, { untilMs: number; timer: NodeJS.Timeout }>();

  constructor(logger: SaturationLogger, now: () => number) {
    this.#logger = logger;
    this.#now = now;
  }

  saturated(provider: string, model: string, untilMs: number, cause: LearnedCause): void {
    const target = `${provider}/${model}`;
    const known = this.#cooling.get(target);
    if (known !== undefined && known.untilMs >= untilMs) return;
    if (known === undefined) {
      this.#logger.info({ provider, model, cause, until: new Date(Math.round(untilMs)).toISOString() }, `${target} enters cooldown: ${REASONS[cause]}`);
    } else {
      clearTimeout(known.timer);
    }
    const timer = setTimeout(() => {
      this.#cooling.delete(target);
      this.#logger.info({ provider, model }, `${target} leaves cooldown`);
    }, Math.max(0, untilMs - this.#now()));
    timer.unref();
    this.#cooling.set(target, { untilMs, timer });
  }

  close(): void {
    for (const { timer } of this.#cooling.values()) clearTimeout(timer);
    this.#cooling.clear();
  }
}
