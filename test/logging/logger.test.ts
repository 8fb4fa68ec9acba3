/**
 * The command's logger: secrets cleared from every line, whichever field or message they are in,
 * escaped in a JSON string or not; credential headers redacted from logged objects.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SecretScrubber, createLogger } from '../../src/logging/logger.ts';

function capture(secrets: string[]): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const scrubber = new SecretScrubber();
  scrubber.add(secrets);
  const lines: string[] = [];
  return { lines, logger: createLogger({ level: 'info', scrubber, destination: { write: (line: string) => void lines.push(line) } }) };
}

describe('the command\'s logger', () => {
  it('clears a secret from the message, any field and an error\'s text', () => {
    const { lines, logger } = capture(['sk-provider-0123456789']);
    logger.info({ upstream: { error: 'bad key sk-provider-0123456789' } }, 'the key sk-provider-0123456789 was refused');
    logger.error({ err: new Error('rejected sk-provider-0123456789') }, 'failed');
    assert.ok(lines.every((line) => !line.includes('sk-provider-0123456789')), lines.join(''));
    const first = JSON.parse(lines[0]!) as { msg: string; upstream: { error: string } };
    assert.deepEqual([first.msg, first.upstream.error], ['the key [redacted] was refused', 'bad key [redacted]']);
    assert.match(lines[1]!, /rejected \[redacted\]/);
  });

  it('clears a secret written escaped in a JSON string, and the longer of two that overlap', () => {
    const quoted = 'pass"word\\with-quotes';
    const { lines, logger } = capture([quoted, 'master-key', 'master-key-longer']);
    logger.info({ value: quoted, both: 'master-key-longer and master-key' }, 'x');
    const line = JSON.parse(lines[0]!) as { value: string; both: string };
    assert.deepEqual([line.value, line.both], ['[redacted]', '[redacted] and [redacted]']);
  });

  it('clears anything shaped like a managed key\'s secret, known or not', () => {
    const { lines, logger } = capture([]);
    const secret = `fg-${'A'.repeat(20)}_${'b-'.repeat(11)}`;
    assert.equal(secret.length, 46);
    logger.warn(`presented ${secret}`);
    assert.equal((JSON.parse(lines[0]!) as { msg: string }).msg, 'presented [redacted]');
  });

  it('redacts credential headers of a logged request or response, and leaves short values alone', () => {
    const { lines, logger } = capture(['short']);
    logger.info({ req: { headers: { authorization: 'Bearer anything', 'x-api-key': 'k', accept: '*/*' } }, headers: { cookie: 'c=1' } }, 'short words stay');
    const line = JSON.parse(lines[0]!) as { req: { headers: Record<string, string> }; headers: Record<string, string>; msg: string };
    assert.deepEqual(line.req.headers, { authorization: '[redacted]', 'x-api-key': '[redacted]', accept: '*/*' });
    assert.deepEqual(line.headers, { cookie: '[redacted]' });
    assert.equal(line.msg, 'short words stay', 'a value under 8 characters is not searched for');
  });
});
