/**
 * An upstream whose answers report exactly the usage a test sets, in the OpenAI chat and
 * Anthropic Messages dialects, so that costs can be asserted to the last digit (including
 * cached prompt tokens, which the general fake upstream does not report).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FixedUsageUpstream {
  readonly url: string;
  /** The `usage` object of the next answers, in the dialect of the route asked. */
  setUsage(usage: Record<string, unknown>): void;
  close(): Promise<void>;
}

export async function startFixedUsageUpstream(): Promise<FixedUsageUpstream> {
  let usage: Record<string, unknown> = {};
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
    req.on('end', () => {
      const model = (JSON.parse(raw || '{}') as { model?: string }).model ?? '';
      const body =
        req.url === '/v1/messages'
          ? { id: 'msg_1', type: 'message', role: 'assistant', model, content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', stop_sequence: null, usage }
          : { id: 'chatcmpl-1', object: 'chat.completion', created: 0, model, choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }], usage };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    setUsage: (next) => {
      usage = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
