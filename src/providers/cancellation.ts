import { EventEmitter } from 'node:events';

/**
 * Tells a provider call that whoever asked for it is gone: the client disconnected, the gateway
 * is shutting down, a deadline passed. It fires 'abort' once, and undici takes it as a request
 * signal as it is.
 *
 * Why not an AbortSignal: every model request needs one, and undici watches an AbortSignal through
 * Node's EventTarget listener machinery, which costs far more per request than an EventEmitter
 * (undici accepts either). It has no `aborted` property on purpose: undici treats anything that
 * has one as an AbortSignal.
 */
export class Cancellation extends EventEmitter {
  private done = false;
  /** Why it was cancelled, when the canceller said; undici fails the call with it. */
  reason: Error | undefined;

  get cancelled(): boolean {
    return this.done;
  }

  cancel(reason?: Error): void {
    if (this.done) return;
    this.done = true;
    this.reason = reason;
    this.emit('abort');
  }

  /** The error a call cancelled before it started throws (the shape undici's abort errors have). */
  static error(): Error {
    const err = new Error('the request was cancelled');
    err.name = 'AbortError';
    return err;
  }

  /**
   * Follows `signal` (cancelled when it aborts). For callers that own an AbortSignal anyway,
   * such as a shutdown or a timeout; not for the request path.
   */
  static fromSignal(signal: AbortSignal): Cancellation {
    const cancellation = Cancellation.shared();
    if (signal.aborted) cancellation.cancel();
    else signal.addEventListener('abort', () => cancellation.cancel(), { once: true });
    return cancellation;
  }

  /** One for many calls at once (a shutdown): as many listeners as there are calls in flight. */
  static shared(): Cancellation {
    const cancellation = new Cancellation();
    cancellation.setMaxListeners(0);
    return cancellation;
  }

  /** Never cancelled: for calls nobody waits on to be abandoned (model discovery at start-up). */
  static never(): Cancellation {
    return new Cancellation();
  }
}
