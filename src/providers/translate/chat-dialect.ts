/**
 * The three client dialects a provider reached through a chat translation serves (`bedrock`
 * through Converse, `gemini` and `vertex` through `generateContent`): chat completions as they
 * are, Anthropic Messages and the Responses API translated to chat and back. The provider
 * translates `chat` to its own call and its answer to a chat completion (or chat chunks);
 * the dialect does the rest.
 */
import type { Endpoint } from '../types.ts';
import { chatToMessagesResponse, errorToAnthropic } from './anthropic-response.ts';
import { ChatToMessagesStream } from './anthropic-stream.ts';
import { ChatSseWriter, type ChatChunkSink } from './chat-sse.ts';
import { obj } from './json.ts';
import type { Json } from './json.ts';
import { messagesToChat, type ChatTarget } from './messages-to-chat.ts';
import { ChatToResponsesStream, chatToResponsesResponse, responsesToChatRequest } from './responses.ts';
import type { UnsupportedPolicy } from './unsupported.ts';

export interface ChatDialect {
  /** The client's request as a chat request (what cannot be carried already went to the policy). */
  readonly chat: Json;
  /** The whole (non-streamed) answer, from the chat completion. */
  answer(completion: Json): Json;
  /** Where streamed chat chunks go; closed (`finish`) only once the answer finished. */
  sink(): ChatChunkSink;
  /** An error body in the dialect's shape, from the OpenAI-shaped one. */
  error(body: Buffer, status: number): Buffer;
}

/** An OpenAI-shaped error body stays as it is (chat, Responses, embeddings). */
export const asOpenAIError = (body: Buffer): Buffer => body;

/** The `error.type` OpenAI gives an answer of this status. */
export function openaiErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'api_error' : 'invalid_request_error';
}

/**
 * A provider's own error answer (Bedrock's exception, Google's error) as the OpenAI-shaped body
 * every dialect's `error` starts from; `code` is the provider's name for the error
 * (`ThrottlingException`, `RESOURCE_EXHAUSTED`).
 */
export function openaiErrorBody(status: number, message: string, code: string | null): Buffer {
  return Buffer.from(JSON.stringify({ error: { message, type: openaiErrorType(status), param: null, code } }));
}

/**
 * The dialect of a `chat`, `messages` or `responses` call; undefined for other endpoints.
 * `target` says what the provider's chat translation takes beyond the common parameters.
 */
export function chatDialect(
  call: { endpoint: Endpoint; model: string; stream: boolean; json: Json },
  policy: UnsupportedPolicy,
  target: ChatTarget,
): ChatDialect | undefined {
  const { json, model } = call;
  switch (call.endpoint) {
    case 'chat': {
      const includeUsage = obj(json.stream_options)?.include_usage === true;
      return { chat: json, answer: (completion) => completion, sink: () => new ChatSseWriter({ includeUsage }), error: asOpenAIError };
    }
    case 'messages':
      return {
        chat: messagesToChat({ ...json, model, stream: call.stream }, policy, target),
        answer: chatToMessagesResponse,
        sink: () => new ChatToMessagesStream({ model }),
        error: errorToAnthropic,
      };
    case 'responses':
      return {
        chat: responsesToChatRequest(json, policy),
        answer: (completion) => chatToResponsesResponse(completion, json),
        sink: () => new ChatToResponsesStream({ model, request: json }),
        error: asOpenAIError,
      };
    default:
      return undefined;
  }
}
