/**
 * Why the connection to Redis fails, in words an operator can act on. ioredis reports a wrong
 * password as "Connection is closed." (the server's WRONGPASS comes only as an 'error' event), a
 * `rediss://` URL pointed at a plain server as a connect timeout, and a database the server does
 * not have not at all (the SELECT fails and the connection goes on with database 0). This module
 * watches the connection's events and names the cause: `authentication failed`, `TLS handshake
 * failed`, `database <n> does not exist`.
 */
import { connect as tcpConnect } from 'node:net';
import type { Redis } from 'ioredis';

export type RedisTroubleKind = 'authentication' | 'tls' | 'database';

export interface RedisTrouble {
  kind: RedisTroubleKind;
  /** What `GET /health` says after `redis unreachable: `. */
  cause: string;
  /** The server's or the TLS layer's own words. */
  detail: string;
}

/** The kinds of trouble an error says plainly; undefined for a plain connection failure (refused, reset, timeout). */
export function classifyRedisError(err: unknown, database: number): RedisTrouble | undefined {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | null)?.code;
  if (/^(WRONGPASS|NOAUTH)\b|invalid password|invalid username-password/i.test(message)) {
    return { kind: 'authentication', cause: 'authentication failed', detail: message };
  }
  if (/DB index is out of range|invalid DB index/i.test(message)) {
    return { kind: 'database', cause: `database ${database} does not exist`, detail: message };
  }
  if ((typeof code === 'string' && TLS_CODE.test(code)) || /secure TLS connection|SSL routines|wrong version number/i.test(message)) {
    return { kind: 'tls', cause: 'TLS handshake failed', detail: message };
  }
  return undefined;
}

/** OpenSSL and Node TLS error codes, and the certificate verification failures. */
const TLS_CODE = /^(ERR_SSL_|ERR_TLS_|EPROTO$|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|UNABLE_TO_(VERIFY|GET)_|HOSTNAME_MISMATCH$)/;

export interface DiagnosisTarget {
  host: string;
  port: number;
  database: number;
  tls: boolean;
  /** How long a TCP probe waits (the client's connect timeout). */
  connectTimeoutMs: number;
}

/**
 * The trouble of one ioredis connection, kept up to date from its events: each error replaces the
 * cause (a plain failure clears it), a connection that becomes ready clears it, unless its SELECT
 * failed. A TLS connection that fails for no reason given is checked once more in plain text: a
 * server that answers a plain PING is a plain Redis server, which never completes a TLS handshake.
 */
export class RedisDiagnosis {
  readonly #target: DiagnosisTarget;
  #trouble: RedisTrouble | undefined;
  /** This connection's SELECT failed: it would use database 0. */
  #badDatabase = false;
  #check: Promise<void> | undefined;

  constructor(client: Redis, target: DiagnosisTarget) {
    this.#target = target;
    client.on('connect', () => {
      this.#badDatabase = false;
    });
    client.on('ready', () => {
      if (!this.#badDatabase) this.#trouble = undefined;
    });
    client.on('error', (err: unknown) => this.#observe(err));
  }

  /** The known trouble of the connection, or undefined (all is well, or the cause is unknown). */
  get trouble(): RedisTrouble | undefined {
    return this.#trouble;
  }

  /** The connection is up but on database 0, because the server does not have the one asked for. */
  get badDatabase(): boolean {
    return this.#badDatabase;
  }

  /** Why the connection must not be used although the server answers (it is on database 0), or undefined. */
  wrongDatabase(): Error | undefined {
    return this.#badDatabase ? this.explain(new Error('the connection is on database 0')) : undefined;
  }

  /** `redis unreachable`, with the cause when it is known. */
  describe(): string {
    return this.#trouble === undefined ? 'redis unreachable' : `redis unreachable: ${this.#trouble.cause}`;
  }

  /** `err` with the known cause put first, for a log line. */
  explain(err: unknown): Error {
    const message = err instanceof Error ? err.message : String(err);
    const trouble = this.#trouble;
    if (trouble === undefined) return err instanceof Error ? err : new Error(message);
    return new Error(trouble.detail === message ? `${trouble.cause}: ${message}` : `${trouble.cause}: ${trouble.detail} (${message})`);
  }

  /** Like explain(), once the plain-text check of a TLS connection that failed has answered. */
  async examine(err: unknown): Promise<Error> {
    if (this.#target.tls && this.#trouble === undefined) this.#checkPlain();
    await this.#check;
    return this.explain(err);
  }

  #observe(err: unknown): void {
    const trouble = classifyRedisError(err, this.#target.database);
    if (trouble?.kind === 'database') this.#badDatabase = true;
    if (trouble === undefined && this.#target.tls) {
      // Keep what the last check found until this one has answered.
      this.#checkPlain();
      return;
    }
    this.#trouble = trouble;
  }

  #checkPlain(): void {
    if (this.#check !== undefined) return;
    const { host, port, connectTimeoutMs } = this.#target;
    this.#check = answersPlainRedis(host, port, connectTimeoutMs).then((plain) => {
      this.#check = undefined;
      // An error that said more in the meantime stands.
      if (this.#trouble !== undefined && this.#trouble.kind !== 'tls') return;
      this.#trouble = plain ? PLAIN_SERVER : undefined;
    });
  }
}

const PLAIN_SERVER: RedisTrouble = {
  kind: 'tls',
  cause: 'TLS handshake failed',
  detail: 'the server answers plain Redis commands and never completes a TLS handshake: use a redis:// URL, or enable TLS on the server',
};

/** Whether the server at host:port answers a plain-text PING as Redis does (`+PONG`, or an error such as `-NOAUTH`). */
function answersPlainRedis(host: string, port: number, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tcpConnect({ host, port });
    const done = (plain: boolean): void => {
      socket.destroy();
      resolve(plain);
    };
    socket.setTimeout(ms, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data: Buffer) => done(data[0] === 0x2b || data[0] === 0x2d));
  });
}
