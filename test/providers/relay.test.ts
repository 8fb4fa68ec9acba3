import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Readable, Transform } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { describe, it } from 'node:test';
import { relay, type ChunkStage, type UpstreamBody } from '../../src/providers/upstream.ts';

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

const upperStage = (): ChunkStage => ({ chunk: (chunk) => chunk.toString().toUpperCase(), end: () => '!' });

describe('relay()', () => {
  it('passes every chunk through a chunk stage, in order, and the stage its tail', async () => {
    const source = Readable.from(['a', 'b', 'c'].map((c) => Buffer.from(c)));
    assert.equal((await buffer(relay(asBody(source), (e) => e, upperStage()))).toString(), 'ABC!');
  });

  it('destroys the upstream, failing with its error, when a chunk stage throws', async () => {
    const source = new Readable({ read() {} });
    const out = relay(asBody(source), (e) => e, { chunk: () => { throw new Error('event too large'); }, end: () => undefined });
    source.push('x');
    await assert.rejects(buffer(out), /event too large/);
    assert.equal(source.destroyed, true);
  });

  it('pauses the upstream while nobody reads what it relayed, and resumes it when read', async () => {
    const source = new Readable({ read() {} });
    const out = relay(asBody(source), (e) => e, upperStage());
    for (let i = 0; i < 64; i++) source.push(Buffer.alloc(1024, 'a'));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(source.isPaused(), true, 'the upstream is paused past the relay\'s buffer');
    source.push(null);
    assert.equal((await buffer(out)).length, 64 * 1024 + 1);
  });

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
