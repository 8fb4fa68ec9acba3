/**
 * What routing answers: a target (one provider instance and its own model id) and the route of one
 * request (the targets to try, in order). Apart from the resolver and the alias balancer, which
 * both build them, so neither imports the other for its types.
 */
import type { Provider } from '../providers/types.ts';

/** One concrete place a request can be executed: a provider instance and its own model id. */
export interface Target {
  readonly provider: Provider;
  /** The provider's own model id. */
  readonly model: string;
  /** `provider/model`, the qualified id clients can use. */
  readonly id: string;
}

/**
 * What a requested model name resolved to, for one request.
 * - `primary`: the targets in the order to try while they are saturated — one for a direct
 *   model, the alias's targets in its strategy's order for this request.
 * - `failover`: tried, in order, when the primary target fails upstream (429, 5xx, timeout,
 *   connection error) or when every primary target is saturated.
 */
export interface Route {
  readonly requested: string;
  /** What the response cache keys on: the target id for a direct model, `alias:<name>` for an alias. */
  readonly cacheModel: string;
  readonly primary: readonly Target[];
  readonly failover: readonly Target[];
  /** The alias's first listed target (or the direct target): whose 429 a client sees when all are saturated. */
  readonly first: Target;
}
