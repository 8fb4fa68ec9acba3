/**
 * Whether Redis is answering. The first failed or late command marks it down: from then on no
 * admission waits for Redis (the store's `on_error` fallback answers at once), and a probe pings it
 * at an interval until it answers, which brings the shared counters back. Both changes are logged
 * once.
 */

/** The log calls this module makes (pino's logger has them). */
export interface CountersLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface AvailabilityOptions {
  /** One round trip that proves Redis answers (PING); rejects otherwise. */
  probe: () => Promise<unknown>;
  /** Time between probes while down. */
  probeIntervalMs: number;
  logger: CountersLogger;
  /** What the gateway does meanwhile, for the log line. */
  fallback: string;
  /** Called when Redis answers again, before admissions go back to it. */
  onRecover?: () => void;
  /** The failure as the log line tells it (with its known cause); default: as it is. */
  explain?: (err: unknown) => unknown;
}

export class RedisAvailability {
  #up = true;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  readonly #options: AvailabilityOptions;

  constructor(options: AvailabilityOptions) {
    this.#options = options;
  }

  get up(): boolean {
    return this.#up;
  }

  /** Redis failed or was too slow: degrade (once) and probe until it answers. */
  down(err: unknown): void {
    if (!this.#up || this.#closed) return;
    this.#up = false;
    const told = this.#options.explain?.(err) ?? err;
    const reason = told instanceof Error ? told.message : String(told);
    this.#options.logger.warn({ err: reason }, `rate-limit counters: Redis unreachable (${reason}); ${this.#options.fallback} until it answers`);
    this.#schedule();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
  }

  #schedule(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => void this.#probe(), this.#options.probeIntervalMs);
    this.#timer.unref();
  }

  async #probe(): Promise<void> {
    try {
      await this.#options.probe();
    } catch {
      this.#schedule();
      return;
    }
    if (this.#closed) return;
    this.#options.onRecover?.();
    this.#up = true;
    this.#options.logger.info({}, 'rate-limit counters: Redis answers again; back to the shared counters');
  }
}
