/** Reading a gateway's `/metrics` with a real Prometheus text parser, for the metrics tests. */
import assert from 'node:assert/strict';
import parsePrometheusTextFormat, { type PrometheusFamily, type PrometheusSample } from 'parse-prometheus-text-format';
import type { TestGateway } from './gateway.ts';

export class Scrape {
  readonly text: string;
  /** Every metric family as the parser reads it (name, help, type). */
  readonly families: ReadonlyMap<string, PrometheusFamily>;
  /**
   * Every series with its labels, histograms' `_bucket`, `_sum` and `_count` included: the parser
   * merges a labelled histogram's series into one unlabelled sample (yunyu/parse-prometheus-text-format#13),
   * so they are read from the text without its histogram TYPE lines, as plain series.
   */
  readonly #series: ReadonlyMap<string, PrometheusFamily>;

  constructor(text: string) {
    this.text = text;
    this.families = byName(parsePrometheusTextFormat(text));
    this.#series = byName(parsePrometheusTextFormat(text.replace(/^# TYPE \S+ histogram\n/gm, '')));
  }

  /** Every sample of a series (an absent one has none); `<histogram>_count` and the like included. */
  samples(name: string): PrometheusSample[] {
    return this.#series.get(name)?.metrics ?? [];
  }

  /** The one sample whose labels are exactly `labels`, or undefined. */
  sample(name: string, labels: Record<string, string>): PrometheusSample | undefined {
    const wanted = JSON.stringify(Object.entries(labels).sort());
    return this.samples(name).find((s) => JSON.stringify(Object.entries(s.labels ?? {}).sort()) === wanted);
  }

  /** The value of a sample; 0 when the series does not exist. */
  value(name: string, labels: Record<string, string>): number {
    const sample = this.sample(name, labels);
    return sample === undefined ? 0 : Number(sample.value);
  }

  /** Every label value of every series, for boundedness checks. */
  labelValues(): string[] {
    return [...this.#series.values()].flatMap((family) => family.metrics.flatMap((s) => Object.values(s.labels ?? {})));
  }
}

/**
 * Families by name. Without their TYPE line, a histogram's `_bucket`, `_sum` and `_count` series
 * of several label sets come interleaved, and the parser starts a new family at each change of
 * name: the families of one name are merged.
 */
function byName(families: PrometheusFamily[]): Map<string, PrometheusFamily> {
  const merged = new Map<string, PrometheusFamily>();
  for (const family of families) {
    const known = merged.get(family.name);
    if (known === undefined) merged.set(family.name, family);
    else merged.set(family.name, { ...known, metrics: [...known.metrics, ...family.metrics] } as PrometheusFamily);
  }
  return merged;
}

/** GET /metrics, asserted to be a 200 in the Prometheus text format, parsed. */
export async function scrape(gw: TestGateway, headers: Record<string, string> = {}): Promise<Scrape> {
  const res = await gw.request('GET', '/metrics', { headers });
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return new Scrape(res.text);
}
