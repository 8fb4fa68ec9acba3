import { Counter, Histogram, type Registry } from 'prom-client';

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

/** One series of a histogram: what the request path observes into. */
export interface Observer {
  observe(value: number): void;
}

export interface TallyHistogramOptions<L extends string> extends TallyCounterOptions<L> {
  /** Upper bounds of the buckets, ascending (`+Inf` is added). */
  readonly buckets: readonly number[];
}

interface HistogramSeries<L extends string> {
  readonly labels: Record<L, string>;
  /** Observations per bucket (not cumulative); the last one is `+Inf`'s. */
  readonly counts: number[];
  sum: number;
  count: number;
}

type HistogramValues<L extends string> = Awaited<ReturnType<Histogram<L>['get']>>;

/**
 * A prom-client histogram whose series are kept as plain numbers and read when it is scraped,
 * exposed the way prom-client's own are (a series appears with its first observation). An
 * observation is then a bucket search and two additions: prom-client's own `observe` builds and
 * checks a label key and turns the bucket bound into a property name on every call, several
 * times a request. Its inherited `observe` and `labels` are not used: observe through `series`.
 */
export class TallyHistogram<L extends string> extends Histogram<L> {
  readonly #name: string;
  readonly #help: string;
  readonly #bounds: readonly number[];
  readonly #series: Array<HistogramSeries<L>> = [];

  constructor(options: TallyHistogramOptions<L>) {
    super({ name: options.name, help: options.help, labelNames: options.labelNames, buckets: [...options.buckets], registers: options.registers });
    this.#name = options.name;
    this.#help = options.help;
    this.#bounds = [...options.buckets];
  }

  /** A new series with these label values. */
  series(labels: Record<L, string>): Observer {
    const bounds = this.#bounds;
    const s: HistogramSeries<L> = { labels, counts: new Array<number>(bounds.length + 1).fill(0), sum: 0, count: 0 };
    this.#series.push(s);
    return {
      observe(value) {
        // Not a number to count (prom-client's own would throw on the request path).
        if (!Number.isFinite(value)) return;
        let i = 0;
        while (i < bounds.length && value > bounds[i]!) i++;
        s.counts[i]!++;
        s.sum += value;
        s.count++;
      },
    };
  }

  override async get(): Promise<HistogramValues<L>> {
    return this.getForPromString();
  }

  /** What prom-client's registry reads at a scrape (the name of the method it calls on its own histograms). */
  async getForPromString(): Promise<HistogramValues<L>> {
    const values: HistogramValues<L>['values'] = [];
    const name = this.#name;
    const bucket = `${name}_bucket`;
    for (const s of this.#series) {
      if (s.count === 0) continue;
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += s.counts[i]!;
        values.push({ metricName: bucket, labels: { le: this.#bounds[i]!, ...s.labels }, value: cumulative });
      }
      values.push({ metricName: bucket, labels: { le: '+Inf', ...s.labels }, value: s.count });
      values.push({ metricName: `${name}_sum`, labels: s.labels, value: s.sum });
      values.push({ metricName: `${name}_count`, labels: s.labels, value: s.count });
    }
    // As prom-client's own histogram answers. Its typings call `type` a numeric enum, which does
    // not exist at run time (the value is the string), and ask for a `collect` it does not send.
    return { name, help: this.#help, type: 'histogram' as unknown as HistogramValues<L>['type'], aggregator: 'sum', values } as HistogramValues<L>;
  }
}
