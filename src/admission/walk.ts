import type { AdmissionRefusal, AdmissionResult, AdmissionTarget, AdmissionTicket, MaybePromise } from '../ratelimit/index.ts';
import type { Route, Target } from '../routing/types.ts';

/**
 * Asks the rate limits about one step of a walk. Real admission counts the request when it
 * admits it; the explain dry run only reads. Everything else about the walk is the same for both,
 * so what explain predicts cannot drift from what admission does.
 */
export type Admitter = (target: AdmissionTarget) => MaybePromise<AdmissionResult>;

/** A target with capacity: the request may be sent there. */
export interface WalkAdmitted {
  readonly ok: true;
  /** Its place in `TargetWalk.targets`. */
  readonly index: number;
  readonly target: Target;
  readonly ticket: AdmissionTicket;
}

/** No target may be used now. */
export interface WalkRefused {
  readonly ok: false;
  /**
   * A user-path breach (the consumer is over its own limit: no other target can help), or every
   * remaining candidate saturated: the route's first target's refusal with the soonest Retry-After.
   */
  readonly refusal: AdmissionRefusal;
  /** Every refusal met on the way (the one refusal of a user-path breach): what a waiting request waits on. */
  readonly blockers: readonly AdmissionRefusal[];
}

/**
 * The walk over a route's targets for one request. A target saturated by provider or model
 * rules is skipped, never called; a breached user-path rule refuses the request at once. User-path
 * rules are checked and counted with the first admitted target only, provider and model rules
 * with every target tried.
 */
export class TargetWalk {
  /** The primary targets, then (unless the walk is a session's) the failover candidates. */
  readonly targets: readonly Target[];
  readonly #route: Route;
  readonly #userPath: string | undefined;
  readonly #admit: Admitter;
  #userPathCounted = false;
  #refusals: Array<{ target: Target; refusal: AdmissionRefusal }> | undefined;

  /**
   * `withFailover` false: the route's primary targets only (a realtime session, which has no
   * upstream call to fail over from). `userPath` undefined: no user-path rules apply.
   */
  constructor(route: Route, userPath: string | undefined, admit: Admitter, withFailover = true) {
    this.#route = route;
    this.#userPath = userPath;
    this.#admit = admit;
    this.targets = withFailover && route.failover.length > 0 ? [...route.primary, ...route.failover] : route.primary;
  }

  /** The first target from `from` on with capacity, or why there is none. */
  async next(from: number): Promise<WalkAdmitted | WalkRefused> {
    const targets = this.targets;
    for (let index = from; index < targets.length; index++) {
      const target = targets[index]!;
      let result = this.#admit(
        this.#userPathCounted || this.#userPath === undefined
          ? { provider: target.provider.name, model: target.model }
          : { userPath: this.#userPath, provider: target.provider.name, model: target.model },
      );
      if (result instanceof Promise) result = await result;
      if (result.ok) {
        this.#userPathCounted = true;
        return { ok: true, index, target, ticket: result };
      }
      if (result.userPathBreached) return { ok: false, refusal: result, blockers: [result] };
      (this.#refusals ??= []).push({ target, refusal: result });
    }
    return { ok: false, refusal: this.#saturated(), blockers: this.#refusals!.map((r) => r.refusal) };
  }

  /** Where to go on after the target at `index` failed upstream: failover candidates only, never an alias's other targets. */
  afterFailure(index: number): number {
    return Math.max(index + 1, this.#route.primary.length);
  }

  /**
   * Every candidate tried is saturated: the client sees the refusal of the route's first target
   * (the one it asked for, or an alias's first), with the Retry-After of whichever frees up first.
   */
  #saturated(): AdmissionRefusal {
    const refusals = this.#refusals!;
    const original = (refusals.find((r) => r.target === this.#route.first) ?? refusals[0]!).refusal;
    let soonest = original.retryAfterSeconds;
    let soonestAt = original.retryAtSeconds;
    for (const { refusal } of refusals) {
      soonest = Math.min(soonest, refusal.retryAfterSeconds);
      soonestAt = Math.min(soonestAt, refusal.retryAtSeconds);
    }
    if (soonest === original.retryAfterSeconds && soonestAt === original.retryAtSeconds) return original;
    const triple = original.headers;
    return {
      ...original,
      retryAfterSeconds: soonest,
      retryAtSeconds: soonestAt,
      headers: triple && {
        requests: triple.requests && { ...triple.requests, reset: soonest },
        tokens: triple.tokens && { ...triple.tokens, reset: soonest },
      },
    };
  }
}
