/**
 * The HTTP(S) server of a fake upstream: on 127.0.0.1 at a free port, a handler that fails
 * destroys its connection (the client sees a broken connection, as from a crashed upstream), and
 * `close()` drops open connections so a test never waits for keep-alive sockets.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

export interface LoopbackServer {
  /** The server, for what else it serves (a WebSocket upgrade). */
  readonly server: Server;
  /** `http://127.0.0.1:<port>` (`https://` with `tls`). */
  readonly url: string;
  close(): Promise<void>;
}

export async function startLoopbackServer(
  handle: (req: IncomingMessage, res: ServerResponse) => Promise<void> | void,
  options: { tls?: { cert: string; key: string } } = {},
): Promise<LoopbackServer> {
  const listener = (req: IncomingMessage, res: ServerResponse): void => {
    Promise.resolve()
      .then(() => handle(req, res))
      .catch(() => res.destroy());
  };
  const server: Server = options.tls ? createHttpsServer(options.tls, listener) : createHttpServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `${options.tls ? 'https' : 'http'}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    server,
    url,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
