import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * V8 settings for a long-running gateway process, applied by the entry points that serve traffic
 * (the `floodgate` command, `npm start`, the bench launcher), never by the library: tests and
 * embedders keep their own runtime. Measurements: docs/performance.md, the changes table.
 *
 * Set at run time (tuneV8ForServing):
 * - No allocation-site pretenuring. When load starts, everything some allocation sites made
 *   since the last scavenge is still alive at it, and V8 then allocates all those sites make
 *   directly in the old generation, including the objects each request makes and drops. A dead
 *   old object lives until the next mark-compact and keeps the young objects it points to alive
 *   through scavenges: about 1.8 KB of every request's garbage was promoted, without
 *   pretenuring under 0.1 KB.
 */
export const RUNTIME_V8_FLAGS: readonly string[] = ['--no-allocation-site-pretenuring'];

/**
 * Given on the `node` command line (`npm start` and bin/floodgate.js do): V8 sizes the heap when
 * it creates it, and `v8.setFlagsFromString` afterwards changes neither setting (a gateway that
 * set `--no-memory-reducer` so still shrank its heap from 352 to 170 MB after 20 idle seconds;
 * started with the flag, it kept it).
 * - No memory reducer. After a few idle seconds it runs collections that hand the heap back to
 *   the operating system, and the next burst of traffic faults it all in again; on virtual
 *   machines that return freed guest memory to the host (virtio-balloon free page reporting)
 *   each such fault is slow: the first seconds after a quiet spell ran 1.7 page faults and 2.4x
 *   the CPU per request. The heap stays at the size load grew it to, which is what the host
 *   must have for the next peak anyway.
 * - The young generation never below 64 MB a semi-space (V8's maximum on 64-bit; a smaller
 *   `--max-semi-space-size` caps it). Load grows it to that size within seconds, but after about
 *   a minute without traffic V8 takes the low allocation rate for a quiet process and shrinks it
 *   at the next scavenges (new space 128 -> 24 MB, measured); the following ~8 s of traffic then
 *   ran 2-3x the scavenges while it grew back, and side by side with a process that had been
 *   busy, 1-9% fewer requests/s.
 *   The same reasoning as the memory reducer: the size traffic needs is kept, and a new process
 *   starts at it.
 */
export const STARTUP_V8_FLAGS: readonly string[] = ['--no-memory-reducer', '--min-semi-space-size=64'];

/**
 * Applies RUNTIME_V8_FLAGS, except those the operator set either way on the node command line
 * (`node --allocation-site-pretenuring bin/floodgate.js` keeps pretenuring). Returns the flags applied.
 */
export function tuneV8ForServing(execArgv: readonly string[] = process.execArgv): string[] {
  const applied = notGiven(RUNTIME_V8_FLAGS, execArgv);
  for (const flag of applied) setFlagsFromString(flag);
  return applied;
}

/** STARTUP_V8_FLAGS this process was started without, either way (`--memory-reducer` is a choice, not an omission). */
export function missingStartupFlags(execArgv: readonly string[] = process.execArgv): string[] {
  return notGiven(STARTUP_V8_FLAGS, execArgv);
}

/** The flags of `flags` that the node command line does not set, neither on nor off. */
function notGiven(flags: readonly string[], execArgv: readonly string[]): string[] {
  const given = new Set(execArgv.map(flagName));
  return flags.filter((flag) => !given.has(flagName(flag)));
}

/** `--no-memory_reducer=x` → `memory-reducer`: V8 accepts both spellings and the `no-` prefix. */
function flagName(arg: string): string {
  return arg.replace(/^--?/, '').replace(/^no-/, '').split('=')[0]!.replace(/_/g, '-');
}

/**
 * One full garbage collection, for a serving process that has just loaded its configuration and
 * rules and is about to take traffic. Without the memory reducer nothing collects the garbage of
 * start-up (parsing and compiling a 10,000-rule file leaves ~140 MB of it) until the old
 * generation fills; V8 then sizes its next limit from a heap that is mostly that garbage, and
 * under load the dead objects keep young ones alive through scavenges, so the heap grew by
 * ~6 MB/s and the process spent 4% of its time in GC instead of 0.3%. Resolves false where no
 * collector could be reached.
 *
 * The collection runs inside a process.nextTick callback, while a tick object is alive. The
 * object literal that process.nextTick builds its tick objects with has computed (symbol) keys,
 * and V8's feedback for those keys holds the object's intermediate maps weakly. Collected while
 * no tick object exists, those maps die, the next tick object gets new ones, and V8 marks the
 * sites megamorphic for the rest of the process: every tick object is then built in the
 * runtime, ~17 of them per proxied request, 12% of the gateway's instructions.
 */
export function collectStartupGarbage(): Promise<boolean> {
  return new Promise((resolve, reject) => {
    process.nextTick(() => {
      try {
        resolve(collectNow());
      } catch (err) {
        reject(err);
      }
    });
  });
}

function collectNow(): boolean {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (typeof exposed === 'function') {
    exposed();
    return true;
  }
  // A context created while --expose-gc is set carries `gc` on its global; the flag is set back
  // so this process's own global stays as it was.
  setFlagsFromString('--expose-gc');
  let gc: unknown;
  try {
    gc = runInNewContext('gc');
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
  if (typeof gc !== 'function') return false;
  (gc as () => void)();
  return true;
}
