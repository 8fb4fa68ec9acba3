/**
 * Token counts computed by the gateway itself, with OpenAI's tokenizers (`gpt-tokenizer`, pure
 * JS, its encodings shipped in the package). Exact for OpenAI models; for every other model
 * (Claude, Gemini, Llama...) `o200k_base` stands in for a tokenizer that is not public or not
 * bundled, so the count is an estimate of the same order, not the provider's number.
 *
 * An encoding is loaded on first use (it takes a noticeable moment and tens of megabytes), so a
 * gateway that never needs a count never pays for it.
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

const loaded = new Map<EncodingName, Promise<Encoding>>();
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

/** The tokens of `texts` together, as `model`'s tokenizer (see encodingOf) counts them. */
export async function countTokens(model: string, texts: readonly string[]): Promise<number> {
  if (texts.every((t) => t === '')) return 0;
  const name = encodingOf(model);
  let encoding = loaded.get(name);
  if (encoding === undefined) {
    encoding = LOADERS[name]();
    loaded.set(name, encoding);
  }
  const encoder = await encoding;
  let tokens = 0;
  for (const text of texts) if (text !== '') tokens += encoder.countTokens(text, PLAIN);
  return tokens;
}
