import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Readable, Transform } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { describe, it } from 'node:test';
import { relay, type UpstreamBody } from '../../src/providers/upstream.ts';

const asBody = (r: Readable): UpstreamBody => r as unknown as UpstreamBody;
/** Resolves when `stream` closed, whatever its error (`once` would reject on it). */
const closed = (stream: Readable): Promise<void> => new Promise((resolve) => stream.once('close', resolve));
const upper = (): Transform => new Transform({
  transform(chunk: Buffer, _encoding, callback) {
    callback(null, chunk.toString().toUpperCase());
  },
  flush(callback) {
    callback(null, '!');
  },
});

describe('relay()', () => {
  it('passes every chunk through the stage, in order, and the stage its tail', async () => {
    const source = Readable.from(['a', 'b', 'c'].map((c) => Buffer.from(c)));
    assert.equal((await buffer(relay(asBody(source), (e) => e, upper()))).toString(), 'ABC!');
  });

  it('passes chunks on as they arrive, before the upstream has ended', async () => {
    const source = new Readable({ read() {} });
    const out = relay(asBody(source), (e) => e);
    source.push('first');
    const [chunk] = await once(out, 'data') as [Buffer];
    assert.equal(chunk.toString(), 'first');
    source.push(null);
  });

  it('fails with the mapped error when the upstream fails mid-way', async () => {
    const source = new Readable({ read() {} });
    const out = relay(asBody(source), (e) => new Error(`mapped: ${(e as Error).message}`), upper());
    source.push('partial');
    setImmediate(() => source.destroy(new Error('socket hang up')));
    await assert.rejects(buffer(out), /mapped: socket hang up/);
  });

  it('destroys the upstream when the relayed stream is destroyed (the client left)', async () => {
    const source = new Readable({ read() {} });
    const out = relay(asBody(source), (e) => e, upper());
    source.push('first');
    await once(out, 'data');
    out.destroy();
    await closed(source);
    assert.equal(source.destroyed, true);
  });

  it('destroys the upstream when the stage fails', async () => {
    const source = new Readable({ read() {} });
    const broken = new Transform({
      transform(_chunk, _encoding, callback) {
        callback(new Error('translation failed'));
      },
    });
    const out = relay(asBody(source), (e) => e, broken);
    source.push('x');
    await assert.rejects(buffer(out), /translation failed/);
    assert.equal(source.destroyed, true);
  });

  it('swallows an upstream error that comes after the client left', async () => {
    const source = new Readable({ read() {} });
    const out = relay(asBody(source), (e) => e);
    out.on('error', () => {});
    out.destroy();
    await closed(source);
    assert.doesNotThrow(() => source.emit('error', new Error('socket reset after the client left')));
  });
});
