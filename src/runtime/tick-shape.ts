/**
 * Keeps the shape of Node's `process.nextTick` entries alive for the life of the process.
 *
 * Node builds each nextTick entry with an object literal whose keys are symbols. V8 remembers the
 * shapes such a literal goes through only weakly: a full garbage collection that runs while no
 * tick is pending frees them, and V8 then marks the literal's property definitions as
 * megamorphic for good, building every later tick entry in its slow runtime path (several times
 * the cost of a tick; a request makes dozens). Whether that happens depends on when the first full
 * collections fall, so it changes with nothing more than the order modules load in. Holding one
 * entry keeps every shape on its path alive, and the fast path with it.
 *
 * Imported first by app.ts, so it runs before the gateway's start-up allocates enough for a full
 * collection.
 */
import { executionAsyncResource } from 'node:async_hooks';

const held: object[] = [];

process.nextTick(() => {
  // Inside a nextTick callback, the execution resource is the tick entry itself.
  held.push(executionAsyncResource());
});
