import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Cancellation } from '../../src/providers/cancellation.ts';

describe('Cancellation', () => {
  it('fires abort once, however often it is cancelled', () => {
    const cancel = new Cancellation();
    let fired = 0;
    cancel.on('abort', () => fired++);
    assert.equal(cancel.cancelled, false);
    cancel.cancel();
    cancel.cancel();
    assert.equal(cancel.cancelled, true);
    assert.equal(fired, 1);
  });

  it('has no aborted property, so undici watches it as an EventEmitter, not as an AbortSignal', () => {
    assert.equal('aborted' in new Cancellation(), false);
  });

  it('follows an AbortSignal, aborted now or later', () => {
    const controller = new AbortController();
    const later = Cancellation.fromSignal(controller.signal);
    assert.equal(later.cancelled, false);
    controller.abort();
    assert.equal(later.cancelled, true);
    assert.equal(Cancellation.fromSignal(AbortSignal.abort()).cancelled, true);
  });

  it('takes as many listeners as calls in flight when shared, without a leak warning', async () => {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => { warnings.push(w); };
    process.on('warning', onWarning);
    try {
      const shared = Cancellation.shared();
      for (let i = 0; i < 50; i++) shared.once('abort', () => {});
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(warnings.filter((w) => w.name === 'MaxListenersExceededWarning'), []);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('gives the AbortError a cancelled call throws', () => {
    assert.equal(Cancellation.error().name, 'AbortError');
  });
});
