/**
 * Token counts computed by the gateway itself, with OpenAI's tokenizers (`gpt-tokenizer`, pure
 * JS, its encodings shipped in the package). Exact for OpenAI models; for every other model
 * (Claude, Gemini, Llama...) `o200k_base` stands in for a tokenizer that is not public or not
 * bundled, so the count is an estimate of the same order, not the provider's number.
 *
 * An encoding is loaded on first use (it takes a noticeable moment and tens of megabytes), so a
 * gateway that never needs a count never pays for it; a gateway that counts every request (token
 * reservations) loads it at start-up (loadDefaultEncoding). Once loaded, a count is synchronous: it runs
 * on every admission with reservations on, and a promise per count would cost that path a turn.
 *
 * Counting runs on the event loop, so its cost is bounded whatever the text: BPE's cost grows with
 * the square of a run of characters without a space, so a text is counted in pieces cut at spaces
 * where it has them (which changes nothing: a word's tokens never span a space) and every
 * MAX_PIECE characters where it has none; and only the first MAX_COUNTED characters are counted,
 * the rest estimated at the same tokens per character.
 */
import { modelToEncodingMap } from 'gpt-tokenizer/mapping';

type EncodingName = 'o200k_base' | 'cl100k_base';

interface Encoding {
  countTokens(text: string, options: { disallowedSpecial: Set<string> }): number;
}

const LOADERS: Readonly<Record<EncodingName, () => Promise<Encoding>>> = {
  o200k_base: () => import('gpt-tokenizer/encoding/o200k_base'),
  cl100k_base: () => import('gpt-tokenizer/encoding/cl100k_base'),
};

/** The encodings loaded, and those being loaded. */
const loaded = new Map<EncodingName, Encoding>();
const loading = new Map<EncodingName, Promise<Encoding>>();
/** Characters counted exactly at most, over all the texts of one count. */
const MAX_COUNTED = 32 * 1024;
/** The longest piece counted in one go. */
const MAX_PIECE = 1024;
/** Special-token markup in a text is counted as the plain text it is, never refused. */
const PLAIN = { disallowedSpecial: new Set<string>() };
const ENCODINGS: Readonly<Record<string, string | undefined>> = modelToEncodingMap;

/**
 * The encoding `model` is counted with: the one OpenAI uses for it, `cl100k_base` for OpenAI's
 * older encodings (close enough for models nobody serves new traffic to), `o200k_base` otherwise.
 */
export function encodingOf(model: string): EncodingName {
  const name = ENCODINGS[model];
  if (name === undefined || name === 'o200k_base' || name === 'o200k_harmony') return 'o200k_base';
  return 'cl100k_base';
}

/**
 * Loads `o200k_base`, the encoding of every model but OpenAI's older ones (see encodingOf), so
 * that the first count does not wait for it; the other loads on its first use.
 */
export async function loadDefaultEncoding(): Promise<void> {
  await encodingNamed('o200k_base');
}

/** The encoding, or the promise of it while it loads (a failed load is tried again next time). */
function encodingNamed(name: EncodingName): Encoding | Promise<Encoding> {
  const encoding = loaded.get(name);
  if (encoding !== undefined) return encoding;
  let pending = loading.get(name);
  if (pending === undefined) {
    pending = LOADERS[name]().then(
      (ready) => {
        loaded.set(name, ready);
        loading.delete(name);
        return ready;
      },
      (err: unknown) => {
        loading.delete(name);
        throw err;
      },
    );
    loading.set(name, pending);
  }
  return pending;
}

/**
 * The tokens of `texts` together, as `model`'s tokenizer (see encodingOf) counts them: at once
 * when its encoding is loaded, else once it is.
 */
export function countTokens(model: string, texts: readonly string[]): number | Promise<number> {
  if (allEmpty(texts)) return 0;
  const encoding = encodingNamed(encodingOf(model));
  return encoding instanceof Promise ? encoding.then((ready) => countWith(ready, texts)) : countWith(encoding, texts);
}

function allEmpty(texts: readonly string[]): boolean {
  for (const text of texts) if (text !== '') return false;
  return true;
}

function countWith(encoder: Encoding, texts: readonly string[]): number {
  let tokens = 0;
  let counted = 0;
  let total = 0;
  for (const text of texts) {
    total += text.length;
    for (let at = 0; at < text.length && counted < MAX_COUNTED; ) {
      const end = pieceEnd(text, at, Math.min(text.length, at + MAX_PIECE, at + MAX_COUNTED - counted));
      tokens += encoder.countTokens(text.slice(at, end), PLAIN);
      counted += end - at;
      at = end;
    }
  }
  return counted < total && counted > 0 ? Math.ceil((tokens * total) / counted) : tokens;
}

/**
 * Where the piece of `text` starting at `from` ends, at most at `limit`: before the last
 * whitespace in its second half when there is one, never between the two halves of a surrogate pair.
 */
function pieceEnd(text: string, from: number, limit: number): number {
  if (limit >= text.length) return text.length;
  for (let i = limit; i > from + (limit - from) / 2; i--) if (isSpace(text.charCodeAt(i))) return i;
  const code = text.charCodeAt(limit - 1);
  return code >= 0xd800 && code <= 0xdbff && limit - 1 > from ? limit - 1 : limit;
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x09 || code === 0x0d;
}
