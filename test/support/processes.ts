/** Processes and ports for the tests that run Floodgate as an operator would (npm start, a packed install). */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A TCP port nothing listens on right now, for a server a test starts (and may stop and start
 * again) on a port it names. Taken below the kernel's ephemeral range, which it hands out to the
 * servers other tests start on port 0, so none of them can take the port meanwhile.
 */
export async function freePort(): Promise<number> {
  const [low, high] = BELOW_EPHEMERAL;
  if (high > low) {
    for (let attempt = 0; attempt < 100; attempt++) {
      const port = low + Math.floor(Math.random() * (high - low));
      if (await canListen(port)) return port;
    }
  }
  return listenOnce(0);
}

/** Ports from 10,000 up to the first of the kernel's ephemeral range (Linux: 32768). */
const BELOW_EPHEMERAL = ((): [number, number] => {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) ? [10_000, first] : [0, 0];
  } catch {
    return [0, 0];
  }
})();

function canListen(port: number): Promise<boolean> {
  return listenOnce(port).then(
    () => true,
    () => false,
  );
}

/** Listens on `port` and closes again; resolves with the port listened on. */
function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A loopback port that refuses connections for the whole test. A port freed after listening on
 * port 0 can be handed to a server another test starts meanwhile; a privileged port never is, as
 * the kernel picks those only when asked by number.
 */
export async function refusedPort(): Promise<number> {
  for (let port = 1; port < 1024; port++) {
    if (!(await accepts(port))) return port;
  }
  throw new Error('every port below 1024 accepts connections on 127.0.0.1');
}

/** Whether something accepts TCP connections on 127.0.0.1:port. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Every process below `pid` (children, their children...), read from /proc. */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // The command name in parentheses may hold spaces: the parent pid is the second field after it.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const list = children.get(parent) ?? [];
    list.push(Number(entry));
    children.set(parent, list);
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

/** The command line of a running process ('' once it is gone). */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits until `check` holds, up to `ms`; returns whether it did. */
export async function eventually(check: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await sleep(25);
  }
}

/**
 * A Node binary older than the one Floodgate needs: the machine's own (the project pins Node 24
 * for itself in node_modules/.bin). Looked up on PATH, then in the usual places.
 */
export function olderNode(): { path: string; version: string } | undefined {
  const candidates = new Set<string>();
  try {
    for (const line of execFileSync('which', ['-a', 'node'], { encoding: 'utf8' }).split('\n')) if (line.trim() !== '') candidates.add(line.trim());
  } catch {
    // `which` finds nothing: the fixed places below remain.
  }
  for (const path of ['/usr/bin/node', '/usr/local/bin/node', '/bin/node']) candidates.add(path);
  for (const path of candidates) {
    if (path.includes('node_modules')) continue;
    let version: string;
    try {
      version = execFileSync(path, ['--version'], { encoding: 'utf8' }).trim();
    } catch {
      continue;
    }
    const [major = 0, minor = 0] = version.slice(1).split('.').map(Number);
    if (major < 22 || (major === 22 && minor < 18)) return { path, version };
  }
  return undefined;
}
