/**
 * Writes and reloads of what replicas share (keys, rules, budgets), one at a time: a reload that
 * read storage before a write can then never undo it. Reloads asked for while one is still queued
 * join it instead of queueing another.
 */
export class Serial {
  /** The last step queued: the next one starts after it. */
  #queue: Promise<unknown> = Promise.resolve();
  #reloadQueued = false;

  run<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(step);
    this.#queue = run.catch(() => {});
    return run;
  }

  /**
   * Keeps `reload` following changes: run on every change `subscribe` reports, and every
   * `intervalMs` (when given) in case a report was lost. Answers a function that stops the periodic reload.
   */
  follow(reload: () => Promise<unknown>, subscribe: (listener: () => void) => void, options: { intervalMs?: number; onError: (err: unknown) => void }): () => void {
    const queueReload = (): void => {
      if (this.#reloadQueued) return;
      this.#reloadQueued = true;
      this.run(() => {
        this.#reloadQueued = false;
        return reload();
      }).catch(options.onError);
    };
    subscribe(queueReload);
    if (options.intervalMs === undefined) return () => {};
    const timer = setInterval(queueReload, options.intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }
}
