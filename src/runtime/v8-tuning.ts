import { setFlagsFromString } from 'node:v8';

/**
 * V8 settings for a long-running gateway process, applied once by the entry points that serve
 * traffic (the `floodgate` command, the bench launcher), never by the library: tests and
 * embedders keep their own runtime.
 *
 * Allocation-site pretenuring is turned off. When load starts, everything some allocation sites
 * made since the last scavenge is still alive at it, and V8 then allocates all those sites make
 * directly in the old generation, including the objects each request makes and drops. A dead old
 * object lives until the next mark-compact and keeps the young objects it points to alive
 * through scavenges: about 1.8 KB of every request's garbage was promoted, and without
 * pretenuring under 0.1 KB (docs/performance.md, the pretenuring row of the changes table).
 */
export function tuneV8ForServing(): void {
  setFlagsFromString('--no-allocation-site-pretenuring');
}
