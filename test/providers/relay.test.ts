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
  ended = false;
  write(chunk: Buffer): boolean {
    assert.equal(this.ended, false, 'write after end');
    this.written.push(chunk);
    return --this.room > 0;
  }
  end(): void {
    this.ended = true;
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
    assert.equal(source.isPaused(), true);
    // At most the one chunk the relay already held goes in after the sink said it was full.
    assert.ok(sink.written.length <= 3, `${sink.written.length} chunks written into a full sink`);
    assert.equal(sink.listenerCount('drain'), 1, 'one drain listener, however many writes found the sink full');
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

  it('ends the sink after the last chunk only when asked to', async () => {
    const ended = new SlowSink(100);
    await relay(asBody(upstream(['a', 'b'])), IDENTITY, (e) => e).pipeTo(ended, { end: true });
    assert.equal(ended.ended, true);
    assert.equal(Buffer.concat(ended.written).toString(), 'ab');
    const open = new SlowSink(100);
    await relay(asBody(upstream(['a'])), IDENTITY, (e) => e).pipeTo(open);
    assert.equal(open.ended, false);
  });

  it('writes a chunk that is not the last before the next one arrives', async () => {
    const source = new Readable({ read() {} });
    const sink = new SlowSink(100);
    const done = relay(asBody(source), IDENTITY, (e) => e).pipeTo(sink, { end: true });
    source.push('first');
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(Buffer.concat(sink.written).toString(), 'first');
    assert.equal(sink.ended, false);
    source.push('last');
    source.push(null);
    await done;
    assert.equal(Buffer.concat(sink.written).toString(), 'firstlast');
  });

  it('writes the last chunk and ends the sink in one tick when the upstream ends with it', async () => {
    const source = new Readable({ read() {} });
    const sink = new SlowSink(100);
    // Stands for the socket's cork: everything done in one tick leaves in one write.
    const ticks: string[] = [];
    let tick = 0;
    const origWrite = sink.write.bind(sink);
    sink.write = (chunk: Buffer): boolean => { ticks.push(`write@${tick}`); return origWrite(chunk); };
    sink.end = (): void => { ticks.push(`end@${tick}`); sink.ended = true; };
    const done = relay(asBody(source), IDENTITY, (e) => e).pipeTo(sink, { end: true });
    source.push('data: last\n\n');
    source.push(null);
    setImmediate(() => { tick++; });
    await done;
    assert.deepEqual(ticks, ['write@0', 'end@0']);
  });

  it('does not end the sink when the upstream fails or the client left', async () => {
    const failing = new Readable({ read() {} });
    const sink = new SlowSink(100);
    const done = relay(asBody(failing), IDENTITY, (e) => e).pipeTo(sink, { end: true });
    failing.destroy(new Error('reset'));
    await assert.rejects(done);
    assert.equal(sink.ended, false);

    const source = new Readable({ read() {} });
    const gone = new SlowSink(100);
    const closed = relay(asBody(source), IDENTITY, (e) => e).pipeTo(gone, { end: true });
    gone.destroyed = true;
    gone.emit('close');
    await closed;
    assert.equal(gone.ended, false);
    assert.equal(source.destroyed, true);
  });

  it('swallows an upstream error that comes after the relay settled', async () => {
    const source = new Readable({ read() {} });
    const sink = new SlowSink(100);
    const done = relay(asBody(source), IDENTITY, (e) => e).pipeTo(sink);
    sink.destroyed = true;
    sink.emit('close');
    await done;
    assert.doesNotThrow(() => source.emit('error', new Error('socket reset after the client left')));
  });
});
