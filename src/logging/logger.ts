/**
 * The gateway's logger: pino writing JSON lines to stdout, with every line cleared of the
 * secrets it must never carry, whichever field (or message, or error text) they would be in.
 */
import pino, { type DestinationStream, type Logger } from 'pino';

/** A managed key's secret (src/auth/keys.ts): `fg-` and 32 bytes in base64url. */
const MANAGED_SECRET = /fg-[A-Za-z0-9_-]{43}/g;
/** Shorter values would match ordinary text; credentials are longer. */
const MIN_SECRET_LENGTH = 8;
const REDACTED = '[redacted]';

/** Credential headers, wherever a logged object carries a request's or response's headers. */
const CREDENTIAL_HEADERS = ['authorization', 'proxy-authorization', 'x-api-key', 'api-key', 'x-goog-api-key', 'cookie'];
const REDACTED_PATHS = CREDENTIAL_HEADERS.flatMap((name) => [`headers["${name}"]`, `*.headers["${name}"]`, `*.*.headers["${name}"]`]);

/**
 * The secrets kept out of the log: managed keys' secrets by their shape, and the values given to
 * `add` (the master key, provider credentials) wherever they appear.
 */
export class SecretScrubber {
  /** Each secret as it is, and as it appears inside a JSON string when that differs (a quote, a backslash). */
  #spellings: string[] = [];

  add(secrets: Iterable<string | undefined>): void {
    for (const secret of secrets) {
      if (secret === undefined || secret.length < MIN_SECRET_LENGTH) continue;
      for (const spelling of [secret, JSON.stringify(secret).slice(1, -1)]) {
        if (!this.#spellings.includes(spelling)) this.#spellings.push(spelling);
      }
    }
    // Longest first: a secret that contains another is cleared whole.
    this.#spellings.sort((a, b) => b.length - a.length);
  }

  scrub(text: string): string {
    let out = text.includes('fg-') ? text.replace(MANAGED_SECRET, REDACTED) : text;
    for (const spelling of this.#spellings) {
      if (out.includes(spelling)) out = out.replaceAll(spelling, REDACTED);
    }
    return out;
  }
}

export interface LoggerOptions {
  level: string;
  scrubber: SecretScrubber;
  /** Default: stdout. */
  destination?: DestinationStream;
}

export function createLogger(options: LoggerOptions): Logger {
  const { scrubber } = options;
  return pino(
    {
      level: options.level,
      base: { service: 'floodgate' },
      redact: { paths: REDACTED_PATHS, censor: REDACTED },
      hooks: { streamWrite: (line) => scrubber.scrub(line) },
    },
    options.destination ?? pino.destination(1),
  );
}
