/**
 * Rule changes between gateways, on a Redis pub/sub channel under the prefix. A gateway that
 * wrote a rule through its admin API announces it; every other gateway sharing the prefix then
 * reloads its rules from the shared storage. Pub/sub delivers at most once, so the subscriber
 * also reports a (re)connection, after which messages may have been missed; the periodic reload
 * of the rule manager is the last safety net.
 */
import type { Redis } from 'ioredis';
import type { CountersLogger } from './availability.ts';
import { within } from './client.ts';

interface Message {
  /** The announcing gateway: it ignores its own messages. */
  from: string;
  kind: 'rules';
}

export class RedisRuleChanges {
  readonly #publisher: Redis;
  readonly #subscriber: Redis;
  readonly #channel: string;
  readonly #self: string;
  readonly #timeoutMs: number;
  readonly #logger: CountersLogger;
  readonly #listeners: Array<() => void> = [];

  constructor(options: { publisher: Redis; subscriber: Redis; channel: string; self: string; timeoutMs: number; logger: CountersLogger }) {
    this.#publisher = options.publisher;
    this.#subscriber = options.subscriber;
    this.#channel = options.channel;
    this.#self = options.self;
    this.#timeoutMs = options.timeoutMs;
    this.#logger = options.logger;
    this.#subscriber.on('message', (channel: string, text: string) => {
      if (channel !== this.#channel) return;
      const message = parse(text);
      if (message !== undefined && message.from !== this.#self) this.#notify();
    });
    let connected = false;
    this.#subscriber.on('ready', () => {
      // The first connection is start-up, which loads the rules anyway.
      if (connected) this.#notify();
      connected = true;
    });
  }

  /** Subscribes; resolves once subscribed or, if Redis does not answer, at once (the subscriber keeps trying). */
  async start(): Promise<void> {
    try {
      await within(this.#subscriber.subscribe(this.#channel), this.#timeoutMs * 4);
    } catch (err) {
      this.#logger.warn({ err: String(err) }, 'rate-limit rule changes: could not subscribe yet; rules are reloaded periodically meanwhile');
    }
  }

  /** Tell the other gateways that the stored rules changed. Never rejects. */
  async announce(): Promise<void> {
    const message: Message = { from: this.#self, kind: 'rules' };
    try {
      await within(this.#publisher.publish(this.#channel, JSON.stringify(message)), this.#timeoutMs);
    } catch (err) {
      this.#logger.warn({ err: String(err) }, 'rate-limit rule changes: could not announce a rule change; other gateways pick it up at their next periodic reload');
    }
  }

  /** Calls `listener` when another gateway changed the rules, or when changes may have been missed. */
  onChange(listener: () => void): void {
    this.#listeners.push(listener);
  }

  #notify(): void {
    for (const listener of this.#listeners) listener();
  }
}

function parse(text: string): Message | undefined {
  try {
    const value = JSON.parse(text) as Partial<Message>;
    return typeof value.from === 'string' && value.kind === 'rules' ? { from: value.from, kind: 'rules' } : undefined;
  } catch {
    return undefined;
  }
}
