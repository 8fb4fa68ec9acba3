import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SseParser, formatSse } from '../../src/providers/sse.ts';

test('parses events split at every byte, with \\r\\n, \\r and multi-line data', () => {
  const text = 'event: a\r\ndata: one\r\ndata: two\r\n\r\n: comment\rdata: x\r\rid: 7\ndata: {"k":"é"}\n\n';
  const bytes = Buffer.from(text);
  const p = new SseParser();
  const events = [];
  for (let i = 0; i < bytes.length; i++) events.push(...p.push(bytes.subarray(i, i + 1)));
  events.push(...p.end());
  assert.deepEqual(events.map((e) => [e.event, e.data, e.id]), [
    ['a', 'one\ntwo', undefined],
    [undefined, 'x', undefined],
    [undefined, '{"k":"é"}', '7'],
  ]);
  assert.equal(events.map((e) => e.raw).join(''), text, 'raw text round-trips');
});

test('comment-only blocks have no data; unterminated tail is returned by end()', () => {
  const p = new SseParser();
  const ev = p.push(': ping\n\ndata: partial');
  assert.equal(ev.length, 1);
  assert.equal(ev[0]?.data, undefined);
  const tail = p.end();
  assert.equal(tail[0]?.data, 'partial');
  assert.equal(tail[0]?.raw, 'data: partial');
});

test('a leading BOM is ignored, formatSse splits newlines', () => {
  const p = new SseParser();
  assert.equal(p.push('\ufeffdata: 1\n\n')[0]?.data, '1');
  assert.equal(formatSse('a\nb', 'x'), 'event: x\ndata: a\ndata: b\n\n');
});

test('an event larger than the limit throws the limit\'s error; one at the limit passes, in any split', () => {
  const limit = { maxEventBytes: 64, tooLarge: () => new Error('too large') };
  const at = `data: ${'é'.repeat(28)}\n\n`; // 6 + 56 + 2 = 64 bytes
  assert.equal(Buffer.byteLength(at), 64);
  for (const size of [1, 5, 64]) {
    const p = new SseParser(limit);
    const bytes = Buffer.from(at + at);
    const events = [];
    for (let i = 0; i < bytes.length; i += size) events.push(...p.push(bytes.subarray(i, i + size)));
    assert.equal(events.length, 2, `split ${size}`);
  }
  // Many short lines without a blank one make one event, counted whole.
  const p = new SseParser(limit);
  p.push('data: 1234567890\n'.repeat(3));
  assert.throws(() => p.push('data: 1234567890\n'.repeat(2)), /too large/);
  // A single line split across chunks, never ended.
  const q = new SseParser(limit);
  q.push(': ok\n\n');
  q.push(`data: ${'x'.repeat(40)}`);
  assert.throws(() => q.push('x'.repeat(40)), /too large/);
});

test('a large event split in small chunks is assembled whole, and its raw text round-trips', () => {
  const data = 'x'.repeat(3 * 1024 * 1024);
  const text = `event: big\ndata: ${data}\n\ndata: after\n\n`;
  const bytes = Buffer.from(text);
  const p = new SseParser();
  const events = [];
  for (let i = 0; i < bytes.length; i += 1000) events.push(...p.push(bytes.subarray(i, i + 1000)));
  events.push(...p.end());
  assert.deepEqual(events.map((e) => [e.event, e.data?.length]), [['big', data.length], [undefined, 5]]);
  assert.equal(events.map((e) => e.raw).join(''), text);
});
