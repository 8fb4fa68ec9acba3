import { Counter, type Registry } from 'prom-client';

/** One series of a counter: what the request path adds to. */
export interface Tally {
  inc(by?: number): void;
}

export interface TallyCounterOptions<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  readonly registers: Registry[];
}

/**
 * A prom-client counter whose series are kept as plain numbers and copied into it when it is
 * scraped (prom-client's `collect`). Counting an event is then an addition: prom-client's own
 * `inc` builds and checks a label key on every call, several times a request.
 */
export class TallyCounter<L extends string> {
  readonly #series: Array<{ readonly labels: Record<L, string>; value: number }> = [];

  constructor(options: TallyCounterOptions<L>) {
    const series = this.#series;
    new Counter<L>({
      name: options.name,
      help: options.help,
      labelNames: options.labelNames,
      registers: options.registers,
      collect() {
        this.reset();
        for (const s of series) this.inc(s.labels, s.value);
      },
    });
  }

  /** A new series with these label values, exposed from now on, at 0 until counted. */
  series(labels: Record<L, string>): Tally {
    const s = { labels, value: 0 };
    this.#series.push(s);
    return {
      inc(by = 1) {
        s.value += by;
      },
    };
  }
}
