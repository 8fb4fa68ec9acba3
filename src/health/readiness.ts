/**
 * Liveness and readiness. Liveness (`GET /health`) says the process serves,
 * degraded or not. Readiness (`GET /ready`) says whether a load balancer should send it traffic:
 * not while it drains for a shutdown, not while its storage cannot be reached, and not while
 * shared counters it cannot do without (`on_error: deny`) are unreachable.
 *
 * Storage is asked only when readiness is: one `SELECT 1` at a time, with a timeout, its answer
 * reused for a moment; nothing here runs on the request path.
 */

export type HealthReport = { status: 'ok' } | { status: 'degraded'; rate_limits: string };

export type ReadyReport =
  | { status: 'ready'; degraded?: string }
  | { status: 'draining' }
  | { status: 'unavailable'; reason: string };

export interface GatewayHealthOptions {
  /** What is wrong with the rate-limit counters ("redis unreachable"); undefined while all is well. */
  counters: () => string | undefined;
  /** Asks shared counters whether they answer now (bounded by their own timeout); `counters()` then tells. */
  checkCounters?: () => Promise<void>;
  /** Whether rate-limited requests are refused while the counters are unreachable (`on_error: deny`). */
  refusedWithoutCounters: boolean;
  /** One round trip to storage; rejects when storage cannot answer. */
  pingStorage: () => Promise<void>;
  /** How long a storage ping may take before storage counts as unreachable. Default 1000. */
  storageTimeoutMs?: number;
  /** How long a storage answer is reused. Default 1000. */
  storageAnswerMs?: number;
  /** Milliseconds on a monotonic clock. */
  clock?: () => number;
}

export class GatewayHealth {
  readonly #options: GatewayHealthOptions;
  readonly #clock: () => number;
  #draining = false;
  /** The storage ping in flight: never two at once, even when one outlives its timeout. */
  #ping: Promise<void> | undefined;
  #storage: { at: number; problem: string | undefined } | undefined;
  #storageCheck: Promise<string | undefined> | undefined;
  #countersCheck: Promise<void> | undefined;

  constructor(options: GatewayHealthOptions) {
    this.#options = options;
    this.#clock = options.clock ?? (() => performance.now());
  }

  /** True from the moment a shutdown starts. */
  get draining(): boolean {
    return this.#draining;
  }

  startDraining(): void {
    this.#draining = true;
  }

  live(): HealthReport {
    const problem = this.#options.counters();
    return problem === undefined ? { status: 'ok' } : { status: 'degraded', rate_limits: problem };
  }

  async ready(): Promise<ReadyReport> {
    if (this.#draining) return { status: 'draining' };
    const [storage] = await Promise.all([this.#storageProblem(), this.#checkCounters()]);
    if (this.#draining) return { status: 'draining' };
    if (storage !== undefined) return { status: 'unavailable', reason: storage };
    const counters = this.#options.counters();
    if (counters === undefined) return { status: 'ready' };
    return this.#options.refusedWithoutCounters ? { status: 'unavailable', reason: counters } : { status: 'ready', degraded: counters };
  }

  #checkCounters(): Promise<void> {
    const check = this.#options.checkCounters;
    if (check === undefined) return Promise.resolve();
    this.#countersCheck ??= check().finally(() => {
      this.#countersCheck = undefined;
    });
    return this.#countersCheck;
  }

  #storageProblem(): Promise<string | undefined> {
    const known = this.#storage;
    if (known !== undefined && this.#clock() - known.at < (this.#options.storageAnswerMs ?? 1000)) return Promise.resolve(known.problem);
    this.#storageCheck ??= this.#checkStorage().then((problem) => {
      this.#storage = { at: this.#clock(), problem };
      this.#storageCheck = undefined;
      return problem;
    });
    return this.#storageCheck;
  }

  async #checkStorage(): Promise<string | undefined> {
    const timeoutMs = this.#options.storageTimeoutMs ?? 1000;
    this.#ping ??= this.#options.pingStorage().finally(() => {
      this.#ping = undefined;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.#ping, late]);
      return undefined;
    } catch (err) {
      return `storage unreachable: ${describe(err)}`;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** A connection error's message; some (a refused connection tried on several addresses) have only a code. */
function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  return err.message !== '' ? err.message : typeof code === 'string' ? code : err.name;
}
