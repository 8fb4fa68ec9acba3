/** What shutdown needs from a request still being answered. */
export interface Cuttable {
  /** Stops the request's upstream work; its answer then ends with an error the client can see. */
  cut(reason: Error): void;
}

/**
 * The model requests being answered right now. Shutdown waits for them, cuts those that outlive
 * the grace period, and waits again until their usage is recorded, so storage closes only after
 * the last record was queued.
 */
export class InFlightRequests {
  private readonly active = new Set<Cuttable>();
  private waiters: Array<() => void> = [];

  /** Tracks a request until the returned function is called (after its usage was recorded). */
  track(request: Cuttable): () => void {
    this.active.add(request);
    return () => {
      this.active.delete(request);
      if (this.active.size === 0) this.wake();
    };
  }

  get size(): number {
    return this.active.size;
  }

  cutAll(reason: Error): void {
    for (const request of this.active) request.cut(reason);
  }

  /** Resolves when nothing is in flight, or after `timeoutMs` (a request that ignores its cut must not hold shutdown). */
  settled(timeoutMs: number): Promise<void> {
    if (this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      timer.unref();
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.waiters.push(done);
    });
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
