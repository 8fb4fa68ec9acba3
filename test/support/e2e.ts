/** Small helpers shared by the end-to-end tests in test/http and test/cli. */
import assert from 'node:assert/strict';
import type { TestResponse } from './gateway.ts';

/** YAML for one OpenAI-compatible provider instance. */
export function openaiProvider(name: string, url: string, models: string[], extra = ''): string {
  return `  ${name}: { type: openai, base_url: ${url}/v1, api_key: k-${name}, models: [${models.join(', ')}]${extra ? `, ${extra}` : ''} }\n`;
}

/** YAML for one Anthropic provider instance. */
export function anthropicProvider(name: string, url: string, models: string[], extra = ''): string {
  return `  ${name}: { type: anthropic, base_url: ${url}, api_key: k-${name}, models: [${models.join(', ')}]${extra ? `, ${extra}` : ''} }\n`;
}

export async function waitFor(cond: () => boolean, ms = 3000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Asserts an OpenAI-dialect gateway error body: `{"error":{"type","message","param","code"}}`. */
export function assertOpenAiError(res: TestResponse, status: number, type: string): { type: string; message: string; param: string | null; code: string | null } {
  assert.equal(res.status, status, `expected HTTP ${status}, got ${res.status}: ${res.text}`);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  const body = res.json();
  assert.deepEqual(Object.keys(body), ['error'], res.text);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type'], res.text);
  assert.equal(body.error.type, type, res.text);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.ok(body.error.param === null || typeof body.error.param === 'string');
  assert.ok(body.error.code === null || typeof body.error.code === 'string');
  assertNoStack(res.text);
  return body.error;
}

/** Asserts an Anthropic-dialect error body: `{"type":"error","error":{"type","message"}}`. */
export function assertAnthropicError(res: TestResponse, status: number, type: string): { type: string; message: string } {
  assert.equal(res.status, status, `expected HTTP ${status}, got ${res.status}: ${res.text}`);
  const body = res.json();
  assert.equal(body.type, 'error', res.text);
  assert.equal(body.error.type, type, res.text);
  assert.equal(typeof body.error.message, 'string');
  assertNoStack(res.text);
  return body.error;
}

/** No stack trace or source file location ever reaches a client. */
export function assertNoStack(text: string): void {
  assert.doesNotMatch(text, /\n\s+at\s|\bat .*\.[tj]s:\d+|node_modules|"stack"/, `response leaks a stack trace: ${text}`);
}
