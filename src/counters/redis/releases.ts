/**
 * Slots given back, between gateways, on a Redis pub/sub channel under the prefix: a request
 * waiting for a concurrency slot on one replica is woken when another replica releases one. The
 * releases of one event-loop turn travel in one message. Pub/sub delivers at most once: a waiting
 * request also checks again now and then (see src/admission/queue.ts), so a lost message only
 * delays it.
 */
import type { Redis } from 'ioredis';
import type { CountersLogger } from './availability.ts';

interface Message {
  /** The releasing gateway: it ignores its own messages (its own waiters were told at once). */
  from: string;
  /** One engine counter key per slot. */
  keys: string[];
}

/** Publishes `message` (made when it leaves) on `channel`; rejects when it could not. */
export type Publish = (channel: string, message: () => string) => Promise<void>;

export class RedisSlotReleases {
  readonly #publish: Publish;
  readonly #channel: string;
  readonly #self: string;
  readonly #logger: CountersLogger;
  readonly #listeners: Array<(keys: readonly string[]) => void> = [];
  #pending: string[] = [];
  #scheduled = false;
  #warned = false;

  constructor(options: { publish: Publish; subscriber: Redis; channel: string; self: string; logger: CountersLogger }) {
    this.#publish = options.publish;
    this.#channel = options.channel;
    this.#self = options.self;
    this.#logger = options.logger;
    // This gateway hears its own messages too, one per turn that released slots: they are told
    // apart by their opening, without parsing them.
    const own = `{"from":${JSON.stringify(this.#self)},`;
    options.subscriber.on('message', (channel: string, text: string) => {
      if (channel !== this.#channel || text.startsWith(own)) return;
      const message = parse(text);
      if (message === undefined || message.from === this.#self) return;
      for (const listener of this.#listeners) listener(message.keys);
    });
  }

  get channel(): string {
    return this.#channel;
  }

  /** Slots this gateway gave back: announced with the others of this turn. Never throws. */
  announce(keys: readonly string[]): void {
    for (const key of keys) this.#pending.push(key);
    if (this.#scheduled) return;
    this.#scheduled = true;
    // With the counter operations of this turn (a separate command would cost its own write and reply).
    let taken = false;
    const message = (): string => {
      taken = true;
      return this.#message();
    };
    this.#publish(this.#channel, message).catch((err: unknown) => {
      // Refused before it left (Redis known down): the next release starts a message of its own.
      if (!taken) {
        this.#scheduled = false;
        this.#pending = [];
      }
      // Waiting requests elsewhere fall back on their periodic checks; said once, not per release.
      if (this.#warned) return;
      this.#warned = true;
      this.#logger.warn({ err: String(err) }, 'rate-limit slot releases: could not tell the other gateways; their waiting requests check again periodically');
    });
  }

  /** Calls `listener` with the keys of slots another gateway gave back. */
  onReleased(listener: (keys: readonly string[]) => void): void {
    this.#listeners.push(listener);
  }

  /** The message of the keys announced since the last one (made as the batch leaves). */
  #message(): string {
    this.#scheduled = false;
    const keys = this.#pending;
    this.#pending = [];
    const message: Message = { from: this.#self, keys };
    return JSON.stringify(message);
  }
}

function parse(text: string): Message | undefined {
  try {
    const value = JSON.parse(text) as Partial<Message>;
    if (typeof value.from !== 'string' || !Array.isArray(value.keys) || !value.keys.every((key) => typeof key === 'string')) return undefined;
    return { from: value.from, keys: value.keys };
  } catch {
    return undefined;
  }
}
