import type { Endpoint } from '../providers/types.ts';
import { badRequest } from '../errors/gateway-error.ts';
import { MAX_JSON_DEPTH, isRecord, nestsDeeperThan } from '../shared/json.ts';

/** The batch endpoints and the provider endpoint each one runs on. */
export const BATCH_ENDPOINTS: Readonly<Record<string, Endpoint>> = {
  '/v1/chat/completions': 'chat',
  '/v1/embeddings': 'embeddings',
  '/v1/responses': 'responses',
};

export interface BatchLine {
  customId: string;
  body: Record<string, unknown>;
}

/**
 * Checks a batch input file line by line (`{custom_id, method: "POST", url, body: {model, ...}}`,
 * every line on the batch's endpoint and one model), so a bad file is refused at submission
 * with the line that is wrong instead of failing later in the background.
 */
export function parseBatchInput(content: Buffer, endpoint: string): { model: string; lines: BatchLine[] } {
  const lines: BatchLine[] = [];
  const ids = new Set<string>();
  let model: string | undefined;
  const text = content.toString('utf8').split('\n');
  for (let i = 0; i < text.length; i++) {
    const raw = text[i]!.trim();
    if (raw === '') continue;
    const where = `input file line ${i + 1}`;
    const fail = (message: string): never => {
      throw badRequest(`${where}: ${message}`, 'input_file_id', 'invalid_batch_input');
    };
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      fail('is not valid JSON');
    }
    if (!isRecord(parsed)) return fail('must be a JSON object');
    if (nestsDeeperThan(parsed, MAX_JSON_DEPTH)) fail(`is nested deeper than ${MAX_JSON_DEPTH} levels`);
    const { custom_id: customId, method, url, body } = parsed;
    if (typeof customId !== 'string' || customId === '') fail('custom_id must be a non-empty string');
    if (ids.has(customId as string)) fail(`custom_id ${JSON.stringify(customId)} is used twice`);
    if (method !== 'POST') fail('method must be "POST"');
    if (url !== endpoint) fail(`url must be the batch's endpoint ${endpoint}`);
    if (!isRecord(body)) return fail('body must be a JSON object');
    if (typeof body.model !== 'string' || body.model.trim() === '') fail('body.model must be a non-empty string');
    if (body.stream === true) fail('body.stream is not supported in a batch');
    const lineModel = (body.model as string).trim();
    if (model !== undefined && lineModel !== model) fail(`every line must use the same model (${model}), found ${lineModel}`);
    model = lineModel;
    ids.add(customId as string);
    lines.push({ customId: customId as string, body });
  }
  if (model === undefined) throw badRequest('input file has no requests', 'input_file_id', 'invalid_batch_input');
  return { model, lines };
}
