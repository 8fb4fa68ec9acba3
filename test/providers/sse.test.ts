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
