/**
 * Bench-only fake OpenAI upstream: as fast as node:http allows, fixed answers.
 *   POST /v1/chat/completions            -> small JSON chat completion with usage
 *   POST /v1/chat/completions (stream)   -> short SSE stream: 2 content chunks, a usage chunk, [DONE]
 *   GET  /v1/models                      -> model list (the gateway discovers models at start-up)
 * Prints `{"port":N}` on stdout once listening on 127.0.0.1.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

const COMPLETION = Buffer.from(JSON.stringify({
  id: 'chatcmpl-bench',
  object: 'chat.completion',
  created: 1700000000,
  model: 'gpt-4o',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello! How can I help you today?' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 9, total_tokens: 21 },
}));

const chunk = (delta: object, finish: string | null): string =>
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1700000000, model: 'gpt-4o', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const STREAM = Buffer.from(
  chunk({ role: 'assistant', content: 'Hello!' }, null) +
  chunk({ content: ' How can I help?' }, 'stop') +
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1700000000, model: 'gpt-4o', choices: [], usage: { prompt_tokens: 12, completion_tokens: 6, total_tokens: 18 } })}\n\n` +
  'data: [DONE]\n\n',
);
const MODELS = Buffer.from(JSON.stringify({ object: 'list', data: [{ id: 'gpt-4o', object: 'model', created: 0, owned_by: 'bench' }] }));

const JSON_HEADERS = { 'content-type': 'application/json', 'content-length': String(COMPLETION.length) };
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

const server = createServer((req, res) => {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(MODELS.length) });
    res.end(MODELS);
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    // A cheap check instead of JSON.parse: the bench bodies are fixed.
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    if (body.includes('"stream":true')) {
      res.writeHead(200, SSE_HEADERS);
      res.end(STREAM);
    } else {
      res.writeHead(200, JSON_HEADERS);
      res.end(COMPLETION);
    }
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
