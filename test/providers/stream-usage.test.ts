import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { describe, it } from 'node:test';
import { SseUsageTap } from '../../src/providers/stream-usage.ts';
import { relay, type UpstreamBody } from '../../src/providers/upstream.ts';

/** Relays `text` through the tap in chunks of `size` bytes; returns what the relay passed on. */
async function run(tap: SseUsageTap, text: string, size: number): Promise<string> {
  const bytes = Buffer.from(text);
  const pieces: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.subarray(i, i + size));
  return (await buffer(relay(Readable.from(pieces) as unknown as UpstreamBody, (e) => e, tap))).toString();
}

/** Hands the tap one chunk; returns what it passes on for it at once. */
function step(tap: SseUsageTap, chunk: string): string {
  const out = tap.chunk(Buffer.from(chunk));
  return out === undefined ? '' : String(out);
}

const content = (text: string, eol: string): string => `data: {"choices":[{"delta":{"content":"${text}"}}],"usage":null}${eol}${eol}`;
const usageChunk = (eol: string): string => `data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}${eol}${eol}`;

describe('SseUsageTap', () => {
  for (const eol of ['\n', '\r\n', '\r']) {
    it(`strips the usage-only chunk with ${JSON.stringify(eol)} line ends, in any split`, async () => {
      const text = content('héllo ✓', eol) + content('b', eol) + usageChunk(eol) + `data: [DONE]${eol}${eol}`;
      for (const size of [1, 2, 3, 5, 64, 4096]) {
        const tap = new SseUsageTap({ stripChatUsageChunk: true });
        assert.equal(await run(tap, text, size), content('héllo ✓', eol) + content('b', eol) + `data: [DONE]${eol}${eol}`, `split ${size}`);
        assert.deepEqual(tap.usage(), { promptTokens: 4, completionTokens: 2, totalTokens: 6 });
      }
    });
  }

  it('finds event ends with mixed line ends (a line ended by LF, the blank line by CRLF)', async () => {
    const event = (json: string): string => `data: ${json}\n\r\n`;
    const text = event('{"choices":[{"delta":{"content":"a"}}],"usage":null}') + event('{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}') + event('[DONE]');
    for (const size of [1, 3, 4096]) {
      const tap = new SseUsageTap({ stripChatUsageChunk: true });
      assert.equal(await run(tap, text, size), event('{"choices":[{"delta":{"content":"a"}}],"usage":null}') + event('[DONE]'), `split ${size}`);
      assert.deepEqual(tap.usage(), { promptTokens: 1, completionTokens: 1, totalTokens: 2 });
    }
  });

  it('reads the usage of a stream arriving event by event, the usage event whole or split, however it is spaced', () => {
    for (const eol of ['\n', '\r\n']) {
      for (const usage of [usageChunk(eol), `data: {"choices":[],"usage" :\t{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}${eol}${eol}`]) {
        for (const split of [false, true]) {
          const tap = new SseUsageTap({ stripChatUsageChunk: true });
          let out = '';
          for (const text of ['a', 'b', 'c']) out += step(tap, content(text, eol));
          if (split) {
            out += step(tap, usage.slice(0, 20));
            out += step(tap, usage.slice(20));
          } else {
            out += step(tap, usage);
          }
          out += step(tap, `data: [DONE]${eol}${eol}`);
          assert.equal(out, content('a', eol) + content('b', eol) + content('c', eol) + `data: [DONE]${eol}${eol}`, `${JSON.stringify(eol)}, split ${split}`);
          assert.deepEqual(tap.usage(), { promptTokens: 4, completionTokens: 2, totalTokens: 6 });
        }
      }
    }
  });

  it('without stripping, passes a chunk of whole events on as it arrives, and a partial event once it is whole', async () => {
    const keep = new SseUsageTap();
    const whole = content('a', '\n') + content('b', '\r\n');
    assert.equal(step(keep, whole), whole, 'whole events go on at once');
    assert.equal(step(keep, content('c', '\n') + 'data: {"cho'), content('c', '\n'), 'the partial event is held');
    assert.equal(step(keep, 'ices":[],"usage":{"prompt_tokens":4,'), '');
    assert.equal(step(keep, '"completion_tokens":2,"total_tokens":6}}\n\n'), 'data: {"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2,"total_tokens":6}}\n\n');
    assert.equal(keep.usage()?.totalTokens, 6);
    // Byte for byte the input, in any split, whatever the line ends.
    for (const eol of ['\n', '\r\n', '\r']) {
      const text = content('héllo ✓', eol) + usageChunk(eol) + `data: [DONE]${eol}${eol}`;
      for (const size of [1, 2, 3, 7, 4096]) assert.equal(await run(new SseUsageTap(), text, size), text, `split ${size}, ${JSON.stringify(eol)}`);
    }
  });

  it('fails with the limit\'s error when an event grows beyond it, having passed on only whole events', async () => {
    const tap = new SseUsageTap({ limit: { maxEventBytes: 100, tooLarge: () => new Error('event too large') } });
    const small = content('a', '\n');
    const source = new Readable({ read() {} });
    const relayed = relay(source as unknown as UpstreamBody, (e) => e, tap);
    const out: string[] = [];
    relayed.on('data', (chunk: Buffer) => out.push(String(chunk)));
    const failed = new Promise<Error>((resolve) => relayed.on('error', resolve));
    source.push(Buffer.from(small + 'data: ' + 'x'.repeat(60)));
    source.push(Buffer.from('y'.repeat(60)));
    assert.equal((await failed).message, 'event too large');
    assert.equal(out.join(''), small);
  });

  it('holds back a partial event only when stripping, and releases it at the end', async () => {
    const strip = new SseUsageTap({ stripChatUsageChunk: true });
    assert.equal(step(strip, 'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: {"cho'), 'data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
    assert.equal(step(strip, 'ices":['), '', 'nothing of a partial event goes out');
    assert.equal(step(strip, '{"delta":{}}]}\n\n'), 'data: {"choices":[{"delta":{}}]}\n\n');
    const unterminated = new SseUsageTap({ stripChatUsageChunk: true });
    assert.equal(await run(unterminated, 'data: {"choices":[{"delta":{}}]}\n\ndata: tail-without-blank-line', 7), 'data: {"choices":[{"delta":{}}]}\n\ndata: tail-without-blank-line');
  });

  it('reads Anthropic usage from message_start and message_delta, split byte by byte', async () => {
    const text = 'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
      + 'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"\\"usage\\": {"}}\n\n'
      + 'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":7}}\n\n';
    const tap = new SseUsageTap();
    assert.equal(await run(tap, text, 1), text);
    assert.deepEqual(tap.usage(), { promptTokens: 10, completionTokens: 7, totalTokens: 17 });
  });

  it('keeps a chunk that carries content and usage together, and reads its usage', async () => {
    const text = 'data: {"choices":[{"delta":{"content":"last"}}], "usage": {"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}\n\ndata: [DONE]\n\n';
    for (const size of [1, 9, 4096]) {
      const tap = new SseUsageTap({ stripChatUsageChunk: true });
      assert.equal(await run(tap, text, size), text);
      assert.deepEqual(tap.usage(), { promptTokens: 2, completionTokens: 3, totalTokens: 5 });
    }
  });

  it('takes only the keys themselves: names ending in usage or choices, and those words inside strings, are not', async () => {
    const decoy = 'data: {"xchoices":[],"my_usage":{"prompt_tokens":99,"completion_tokens":99,"total_tokens":198},"text":"usage\\":{ choices\\":[]"}\n\n';
    const text = usageChunk('\n') + decoy + 'data: [DONE]\n\n';
    for (const size of [1, 7, 4096]) {
      const tap = new SseUsageTap({ stripChatUsageChunk: true });
      assert.equal(await run(tap, text, size), decoy + 'data: [DONE]\n\n', `split ${size}`);
      assert.deepEqual(tap.usage(), { promptTokens: 4, completionTokens: 2, totalTokens: 6 });
    }
  });

  it('reads usage objects with nested details and braces inside their strings', async () => {
    const usages = [
      '{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":2}}',
      '{"note":"a } b","prompt_tokens":5,"completion_tokens":1,"total_tokens":6}',
      '{"note":"{ x }","prompt_tokens":5,"completion_tokens":1,"total_tokens":6}',
      '{"details":{"}":"{"},"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}',
    ];
    for (const usage of usages) {
      const text = content('a', '\n') + `data: {"choices":[],"usage":${usage}}\n\n` + 'data: [DONE]\n\n';
      for (const size of [1, 4096]) {
        const tap = new SseUsageTap({ stripChatUsageChunk: true });
        assert.equal(await run(tap, text, size), content('a', '\n') + 'data: [DONE]\n\n', usage);
        const cached = usage.includes('cached_tokens') ? { cachedPromptTokens: 2 } : {};
        assert.deepEqual(tap.usage(), { promptTokens: 5, completionTokens: 1, totalTokens: 6, ...cached }, usage);
      }
    }
  });

  it('reads the usage of an unterminated last event', async () => {
    const tap = new SseUsageTap();
    await run(tap, 'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}', 10);
    assert.equal(tap.usage()?.totalTokens, 2);
  });
});
