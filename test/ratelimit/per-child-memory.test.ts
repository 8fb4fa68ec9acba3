/**
 * 100,000 distinct children through the engine stay within max_children, with the heap measured
 * after forced collections in a process of the test's own (node --expose-gc; see
 * test/support/per-child-memory.ts).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';

const SCRIPT = fileURLToPath(new URL('../support/per-child-memory.ts', import.meta.url));

interface Figures {
  full: { kept: number; bytesPerChild: number; next: string };
  rolling: { kept: number[]; refused: number; heapAt20k: number; heapAt100k: number };
}

describe('per-child rules: memory over 100,000 children', { timeout: 120_000 }, () => {
  it('keeps at most max_children, drops idle children as their windows end, and the heap stays flat', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', SCRIPT], { maxBuffer: 1 << 20 });
    const figures = JSON.parse(stdout) as Figures;

    // Every child in one window: all 100,000 kept, the next one refused until one goes idle.
    assert.equal(figures.full.kept, 100_000);
    assert.equal(figures.full.next, 'rate limit exceeded for /team/user-100000: the minute limit of /team already counts 100000 active children (rate_limits.max_children)');
    assert.ok(figures.full.bytesPerChild > 0 && figures.full.bytesPerChild < 2048, `a kept child costs ${figures.full.bytesPerChild} bytes of heap`);

    // Children coming and going: never more than max_children (10,000) kept, none refused, and the
    // 80,000 children seen after the first 20,000 leave the heap where it was: keeping them would
    // have taken 80,000 times what a child costs.
    const { kept, refused, heapAt20k, heapAt100k } = figures.rolling;
    assert.equal(refused, 0);
    assert.equal(kept.length, 5);
    for (const count of kept) assert.ok(count > 0 && count <= 10_000, `kept ${count}`);
    const growth = heapAt100k - heapAt20k;
    const keptThemAll = 80_000 * figures.full.bytesPerChild;
    assert.ok(growth < keptThemAll / 10, `heap grew ${growth} bytes from 20,000 children to 100,000 (keeping them all: ${Math.round(keptThemAll)})`);
  });
});
