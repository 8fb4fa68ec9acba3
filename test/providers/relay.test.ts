import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { IDENTITY, relay, type ChunkSink, type ChunkTransform, type UpstreamBody } from '../../src/providers/upstream.ts';

/** A sink that accepts `room` writes before asking the writer to wait for 'drain'. */
class SlowSink extends EventEmitter implements ChunkSink {
  readonly written: Buffer[] = [];
  destroyed = false;
  private room: number;
  constructor(room: number) {
    super();
    this.room = room;
  }
  write(chunk: Buffer): boolean {
    this.written.push(chunk);
    return --this.room > 0;
  }
  drain(room: number): void {
    this.room = room;
    this.emit('drain');
  }
}

const upstream = (chunks: string[]): Readable => Readable.from(chunks.map((c) => Buffer.from(c)), { objectMode: false });
const asBody = (r: Readable): UpstreamBody => r as unknown as UpstreamBody;

describe('relay().pipeTo', () => {
  it('writes every transformed chunk in order, pausing the upstream while the sink is full', async () => {
    const source = upstream(['a', 'b', 'c', 'd', 'e']);
    const sink = new SlowSink(2);
    const upper: ChunkTransform = { step: (c) => Buffer.from(c.toString().toUpperCase()), finish: () => Buffer.from('!') };
    const done = relay(asBody(source), upper, (e) => e).pipeTo(sink);
    await new Promise((r) => setImmediate(r));
    assert.equal(sink.written.length, 2, 'stopped at the full sink');
    assert.equal(source.isPaused(), true);
    sink.drain(100);
    await done;
    assert.equal(Buffer.concat(sink.written).toString(), 'ABCDE!');
  });

  it('destroys the upstream and resolves when the sink closes first', async () => {
    const source = new Readable({ read() {} });
    source.push('first');
    const sink = new SlowSink(100);
    const done = relay(asBody(source), IDENTITY, (e) => e).pipeTo(sink);
    await new Promise((r) => setImmediate(r));
    sink.destroyed = true;
    sink.emit('close');
    await done;
    assert.equal(source.destroyed, true);
    assert.equal(Buffer.concat(sink.written).toString(), 'first');
  });

  it('rejects with the mapped error when the upstream fails', async () => {
    const source = new Readable({ read() {} });
    const done = relay(asBody(source), IDENTITY, (e) => new Error(`mapped: ${(e as Error).message}`)).pipeTo(new SlowSink(100));
    source.destroy(new Error('socket hang up'));
    await assert.rejects(done, /mapped: socket hang up/);
  });
});
