/**
 * Counters that survive a restart (rate_limits.persist_counters, memory store only): the request
 * and token windows of the in-memory counters are saved to storage off the request path, and put
 * back at start while they still matter.
 *
 * - Saving: the store notes which windows changed; a timer saves them at most once a second, in
 *   one transaction, and once more at shutdown. A crash (kill -9) loses at most what changed since
 *   the last save. Concurrency slots are never saved: requests in flight do not outlive a process.
 * - Resets and deletes are written through at once: the admin operation answers after the saved
 *   windows are gone, so a restart never brings back counts an operator cleared. Children dropped
 *   while idle, and rules no longer enforced, leave with the next save.
 * - Restoring: after the rules are loaded, each saved window of a counter some rule still has (same
 *   key, same per_child) is put back unless both its windows are over; the others are deleted.
 */
import type { CounterRemovals, CounterRepository, SavedCounter } from '../storage/counters/types.ts';
import { MemoryCounterStore, type CounterJournal, type CounterRemoval, type CounterWindows } from './memory.ts';
import type { CountersLogger } from './redis/availability.ts';

/** How often changed windows are saved. */
const SAVE_INTERVAL_MS = 1000;

export interface CounterPersistenceOptions {
  storage: CounterRepository;
  /** Wall clock in milliseconds (the engine's). */
  now: () => number;
  logger: CountersLogger;
  /** rate_limits.max_children. */
  maxChildren?: number;
}

export class CounterPersistence implements CounterJournal {
  /** The counters, noting what changed for this persistence. */
  readonly store: MemoryCounterStore;
  readonly #storage: CounterPersistenceOptions['storage'];
  readonly #now: () => number;
  readonly #logger: CountersLogger;
  /** Writes run one after another, in the order they were asked for. */
  #queue: Promise<void> = Promise.resolve();
  /** Removals to write with the next save (idle children dropped, rules no longer enforced). */
  #removals: PendingRemovals = emptyRemovals();
  /** Windows a failed save could not write: tried again with the next one, unless removed since. */
  #unsaved = new Map<string, SavedCounter>();
  /** Removals made while a save is being written: should it fail, its windows of those counters are stale. */
  #removedDuringSave: CounterRemoval[] | undefined;
  #timer: NodeJS.Timeout | undefined;
  #saving = false;

  constructor(options: CounterPersistenceOptions) {
    this.#storage = options.storage;
    this.#now = options.now;
    this.#logger = options.logger;
    this.store = new MemoryCounterStore({ maxChildren: options.maxChildren, journal: this });
  }

  /** Puts the saved windows back (call once the rules are loaded), then saves every second. */
  async start(): Promise<void> {
    const now = Math.floor(this.#now() / 1000);
    // Oldest first: children restored later count as more recently used.
    const saved = (await this.#storage.list()).sort((a, b) => a.windowStart - b.windowStart);
    const gone: string[] = [];
    let restored = 0;
    for (const counter of saved) {
      const matters = counter.windowStart + 2 * counter.periodSeconds > now;
      if (matters && this.store.restoreWindows(counter)) restored++;
      else gone.push(counter.key);
    }
    if (gone.length > 0) await this.#storage.write([], { keys: gone });
    this.#logger.info({ restored, discarded: gone.length }, 'rate-limit counters: windows restored from storage (persist_counters)');
    this.#timer = setInterval(() => void this.save(), SAVE_INTERVAL_MS);
    this.#timer.unref();
  }

  /** Saves what changed since the last save. Never rejects: a failure is logged and retried with the next save. */
  save(): Promise<void> {
    if (this.#saving) return this.#queue;
    const windows = this.store.takeChangedWindows();
    const removals = this.#removals;
    if (windows.length === 0 && this.#unsaved.size === 0 && isEmpty(removals)) return this.#queue;
    this.#removals = emptyRemovals();
    const counters = new Map(this.#unsaved);
    this.#unsaved = new Map();
    for (const window of windows) counters.set(window.key, savedCounter(window));
    this.#saving = true;
    this.#removedDuringSave = [];
    return this.#enqueue(async () => {
      try {
        await this.#storage.write([...counters.values()], removals);
      } catch (err) {
        this.#logger.warn({ err: String(err) }, 'rate-limit counters: saving the windows to storage failed; trying again with the next save');
        const since = this.#removedDuringSave ?? [];
        for (const [key, counter] of counters) {
          if (!this.#unsaved.has(key) && !since.some((removal) => covers(removal, key))) this.#unsaved.set(key, counter);
        }
        mergeRemovals(this.#removals, removals);
      } finally {
        this.#saving = false;
        this.#removedDuringSave = undefined;
      }
    });
  }

  /** Stops the timer and saves what is left. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#queue;
    await this.save();
  }

  removed(removal: CounterRemoval): Promise<void> {
    this.#forgetUnsaved(removal);
    const removals = emptyRemovals();
    mergeRemovals(removals, toRemovals(removal));
    // Rejects when storage fails: the reset happened here, but a restart would bring the counts back.
    return this.#enqueue(() => this.#storage.write([], removals), true);
  }

  dropped(removal: CounterRemoval): void {
    this.#forgetUnsaved(removal);
    mergeRemovals(this.#removals, toRemovals(removal));
  }

  #forgetUnsaved(removal: CounterRemoval): void {
    this.#removedDuringSave?.push(removal);
    for (const key of this.#unsaved.keys()) if (covers(removal, key)) this.#unsaved.delete(key);
  }

  #enqueue(write: () => Promise<void>, surfaceErrors = false): Promise<void> {
    const run = this.#queue.then(write);
    this.#queue = run.catch(() => {});
    return surfaceErrors ? run : this.#queue;
  }
}

interface PendingRemovals {
  all: boolean;
  keys: string[];
  prefixes: string[];
}

function savedCounter(window: CounterWindows): SavedCounter {
  return { ...window };
}

/** Whether a removal takes the counter `key` with it. */
function covers(removal: CounterRemoval, key: string): boolean {
  return removal.all || key === removal.key || (removal.withChildren && key.startsWith(removal.key));
}

function emptyRemovals(): PendingRemovals {
  return { all: false, keys: [], prefixes: [] };
}

function isEmpty(removals: CounterRemovals): boolean {
  return !removals.all && (removals.keys?.length ?? 0) === 0 && (removals.prefixes?.length ?? 0) === 0;
}

function toRemovals(removal: CounterRemoval): CounterRemovals {
  if (removal.all) return { all: true };
  // A per-child rule's own key is the prefix of each of its children's keys.
  return removal.withChildren ? { prefixes: [removal.key] } : { keys: [removal.key] };
}

function mergeRemovals(into: PendingRemovals, more: CounterRemovals): void {
  if (more.all) {
    into.all = true;
    into.keys.length = 0;
    into.prefixes.length = 0;
    return;
  }
  if (into.all) return;
  into.keys.push(...(more.keys ?? []));
  into.prefixes.push(...(more.prefixes ?? []));
}
