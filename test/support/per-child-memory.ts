/**
 * Run by test/ratelimit/per-child-memory.test.ts in a process of its own started with
 * --expose-gc, so that heap figures are taken after a full collection: 100,000 distinct children
 * through the engine and the memory store, printed as one JSON line.
 *
 *   full:    max_children 100,000, every child in one window: how much heap a kept child costs,
 *            and what the 100,001st child is answered.
 *   rolling: max_children 10,000, the clock moving on as children come and go: how many are kept,
 *            and how the heap grows from 20,000 children seen to 100,000.
 */
import { MemoryCounterStore } from '../../src/counters/memory.ts';
import { RateLimiter, type RuleDefinition } from '../../src/ratelimit/index.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');

const T0 = 1_700_000_040;
const CHILDREN = 100_000;

function heap(): number {
  gc!();
  gc!();
  return process.memoryUsage().heapUsed;
}

function engine(maxChildren: number) {
  let nowMs = T0 * 1000;
  const limiter = new RateLimiter({ clock: { now: () => nowMs }, store: new MemoryCounterStore({ maxChildren }) });
  const rule: RuleDefinition = { scope: 'user_path', subject: '/team', periodSeconds: 60, maxRequests: 5, perChild: true, source: 'config', createdAt: new Date(0), updatedAt: new Date(0) };
  limiter.replaceRules([rule]);
  return {
    limiter,
    setSeconds(seconds: number) {
      nowMs = seconds * 1000;
    },
    admit(child: number): string {
      const result = limiter.admit({ userPath: `/team/user-${child}/app` });
      if (result instanceof Promise) throw new Error('the memory store answers at once');
      if (!result.ok) return result.message;
      result.release();
      return 'admitted';
    },
    async kept(): Promise<number> {
      return (await limiter.status({ expandChildren: true })).length - 1;
    },
  };
}

async function full() {
  const gateway = engine(CHILDREN);
  const before = heap();
  for (let i = 0; i < CHILDREN; i++) {
    const answer = gateway.admit(i);
    if (answer !== 'admitted') throw new Error(`child ${i}: ${answer}`);
  }
  const after = heap();
  return { kept: await gateway.kept(), bytesPerChild: (after - before) / CHILDREN, next: gateway.admit(CHILDREN) };
}

async function rolling() {
  const gateway = engine(10_000);
  const kept: number[] = [];
  let heapAt20k = 0;
  let refused = 0;
  for (let i = 0; i < CHILDREN; i++) {
    // 40 new children a second: a minute rule's children are idle two minutes on, so about
    // 7,200 are active at any time.
    gateway.setSeconds(T0 + Math.floor(i / 40));
    if (gateway.admit(i) !== 'admitted') refused++;
    if ((i + 1) % 20_000 === 0) {
      kept.push(await gateway.kept());
      if (i + 1 === 20_000) heapAt20k = heap();
    }
  }
  return { kept, refused, heapAt20k, heapAt100k: heap() };
}

console.log(JSON.stringify({ full: await full(), rolling: await rolling() }));
