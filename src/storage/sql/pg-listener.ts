/**
 * PostgreSQL notification channels, followed on a connection of their own (LISTEN cannot share a
 * pooled connection). When the connection is lost it is opened again, a second later and every
 * second after, and the listener is called for every channel once it is back: notifications sent
 * meanwhile are lost.
 */
import pg from 'pg';

export interface ChannelListenerOptions {
  url: string;
  /** Plain identifiers (letters, digits, `_`). */
  channels: readonly string[];
  /** A notification arrived on `channel`, or may have been missed there. */
  onNotify: (channel: string) => void;
  /** The connection was lost (once per loss, not per attempt to reopen it). */
  onError: (err: Error) => void;
  /** Time between attempts to reopen a lost connection. */
  retryMs?: number;
}

export class ChannelListener {
  readonly #options: ChannelListenerOptions;
  readonly #retryMs: number;
  #client: pg.Client | undefined;
  #retry: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: ChannelListenerOptions) {
    for (const channel of options.channels) {
      if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a plain channel name: ${channel}`);
    }
    this.#options = options;
    this.#retryMs = options.retryMs ?? 1000;
  }

  /** Listens; when the first connection fails, keeps trying in the background (and says so once). */
  async start(): Promise<void> {
    try {
      await this.#open();
    } catch (err) {
      this.#options.onError(err as Error);
      this.#scheduleRetry();
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => {});
  }

  async #open(): Promise<void> {
    // Keepalive probes notice a connection that died without a word (a dropped network path).
    const client = new pg.Client({ connectionString: this.#options.url, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
    client.on('notification', (message) => {
      if (this.#options.channels.includes(message.channel)) this.#options.onNotify(message.channel);
    });
    client.on('error', (err) => this.#lost(client, err));
    client.on('end', () => this.#lost(client, new Error(`the connection listening on ${this.#options.channels.join(', ')} ended`)));
    try {
      await client.connect();
      for (const channel of this.#options.channels) await client.query(`LISTEN ${channel}`);
    } catch (err) {
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      throw err;
    }
    if (this.#stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
  }

  #lost(client: pg.Client, err: Error): void {
    if (this.#client !== client || this.#stopped) return;
    this.#client = undefined;
    client.end().catch(() => {});
    this.#options.onError(err);
    this.#scheduleRetry();
  }

  #scheduleRetry(): void {
    if (this.#stopped) return;
    this.#retry = setTimeout(() => {
      this.#open().then(
        // Back: whatever was announced while it was away is unknown.
        () => {
          if (this.#stopped) return;
          for (const channel of this.#options.channels) this.#options.onNotify(channel);
        },
        () => this.#scheduleRetry(),
      );
    }, this.#retryMs);
    this.#retry.unref();
  }
}
