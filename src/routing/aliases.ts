import type { Route, Target } from './types.ts';

export interface AliasDefinition {
  strategy: 'round_robin' | 'weighted' | 'first';
  targets: ReadonlyArray<{ model: string; weight: number }>;
}

/**
 * Picks the order in which an alias's targets are tried for one request. Every rotation of
 * the target list is built once, so a pick allocates nothing: round_robin cycles the start,
 * weighted uses smooth weighted round robin (deterministic: weights 1 and 2 give B A B B A B …),
 * first always starts at the first target. The remaining targets follow in listed order, so
 * a saturated pick falls through to the next one.
 */
export class AliasBalancer {
  readonly #strategy: AliasDefinition['strategy'];
  readonly #routes: readonly Route[];
  readonly #weights: readonly number[];
  readonly #current: number[];
  readonly #totalWeight: number;
  #cursor = 0;
  /** What the response cache keys on: one entry for the alias, whichever target answered. */
  readonly cacheModel: string;

  constructor(definition: AliasDefinition, targets: readonly Target[], name: string, failover: readonly Target[]) {
    this.#strategy = definition.strategy;
    this.#weights = definition.targets.map((t) => t.weight);
    this.#current = this.#weights.map(() => 0);
    this.#totalWeight = this.#weights.reduce((a, b) => a + b, 0);
    const cacheModel = `alias:${name}`;
    this.cacheModel = cacheModel;
    this.#routes = targets.map((_, start) => ({
      requested: name,
      cacheModel,
      primary: [...targets.slice(start), ...targets.slice(0, start)],
      failover,
      first: targets[0]!,
    }));
  }

  next(): Route {
    return this.#routes[this.#pick()]!;
  }

  /** The route next() would return, without taking the turn (a dry run must not move the rotation). */
  peek(): Route {
    switch (this.#strategy) {
      case 'first':
        return this.#routes[0]!;
      case 'round_robin':
        return this.#routes[this.#cursor]!;
      case 'weighted': {
        // #pick adds every weight, then takes the largest: the same choice, without the writes.
        let best = 0;
        for (let i = 1; i < this.#current.length; i++) {
          if (this.#current[i]! + this.#weights[i]! > this.#current[best]! + this.#weights[best]!) best = i;
        }
        return this.#routes[best]!;
      }
    }
  }

  #pick(): number {
    switch (this.#strategy) {
      case 'first':
        return 0;
      case 'round_robin': {
        const index = this.#cursor;
        this.#cursor = (index + 1) % this.#routes.length;
        return index;
      }
      case 'weighted': {
        let best = 0;
        for (let i = 0; i < this.#current.length; i++) {
          this.#current[i]! += this.#weights[i]!;
          if (this.#current[i]! > this.#current[best]!) best = i;
        }
        this.#current[best]! -= this.#totalWeight;
        return best;
      }
    }
  }
}
