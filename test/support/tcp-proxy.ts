/**
 * A TCP proxy the test controls, in front of a server the test must not stop (the shared
 * PostgreSQL): `cut()` makes it unreachable (connections dropped, port closed), `hang()` makes it
 * accept connections and answer nothing, `restore()` brings it back on the same port.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './processes.ts';

export interface TcpProxy {
  readonly port: number;
  cut(): Promise<void>;
  hang(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let mode: 'forward' | 'hang' = 'forward';
  let server: Server | undefined;

  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const listen = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const s = createServer((client) => {
        track(client);
        if (mode === 'hang') return;
        const upstream = connect(target);
        track(upstream);
        client.pipe(upstream).pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => {
        server = s;
        resolve();
      });
    });
  const stop = (): Promise<void> => {
    for (const socket of sockets) socket.destroy();
    const s = server;
    server = undefined;
    return new Promise((resolve) => (s === undefined ? resolve() : s.close(() => resolve())));
  };

  await listen();
  return {
    port,
    cut: stop,
    async hang() {
      await stop();
      mode = 'hang';
      await listen();
    },
    async restore() {
      await stop();
      mode = 'forward';
      await listen();
    },
    close: stop,
  };
}
