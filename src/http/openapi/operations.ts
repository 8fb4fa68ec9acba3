/**
 * What the OpenAPI document says about each route, keyed `METHOD /pattern` as the router knows
 * it. Request bodies, forms and queries are the schemas from src/http/schemas that validate them
 * (the transcription form alone is forwarded to the provider as it is, and described here). A route added without an entry still appears in the document,
 * described by its method and pattern only (test/http/openapi.test.ts asks for an entry).
 */
import { z } from 'zod';
import { deleteBudgetBody, putBudgetBody } from '../schemas/admin-budgets.ts';
import { explainQuery } from '../schemas/admin-explain.ts';
import { createApiKeyBody } from '../schemas/admin-keys.ts';
import { deleteRateLimitBody, listRateLimitsQuery, putRateLimitBody, resetOneRateLimitBody, resetRateLimitsBody } from '../schemas/admin-rate-limits.ts';
import { adminUsageQuery } from '../schemas/admin-usage.ts';
import { createBatchBody, listBatchesQuery, uploadFileForm } from '../schemas/batches.ts';
import { realtimeQuery } from '../schemas/realtime.ts';
import { anthropicMessagesBody, chatCompletionBody, embeddingsBody, responsesBody, speechBody } from '../schemas/model-requests.ts';
import { usageQuery } from '../schemas/usage.ts';
import type { ErrorStatus, OperationDoc, OperationTable } from './document.ts';
import * as examples from './examples.ts';
import type { BodyExample } from './examples.ts';
import * as responses from './responses.ts';

const uploadedFile = z.string().meta({ contentMediaType: 'application/octet-stream', description: 'The file\'s bytes.' });

/** `multipart/form-data` of `POST /v1/audio/transcriptions` (read by the handler, forwarded to the provider). */
const transcriptionForm = z.looseObject({ file: uploadedFile, model: z.string() });
/** Schemas shown under components.schemas, by name. */
export const OPENAPI_SCHEMAS: Readonly<Record<string, z.ZodType>> = {
  ChatCompletionRequest: chatCompletionBody,
  ResponsesRequest: responsesBody,
  EmbeddingsRequest: embeddingsBody,
  SpeechRequest: speechBody,
  AnthropicMessagesRequest: anthropicMessagesBody,
  TranscriptionForm: transcriptionForm,
  FileForm: uploadFileForm,
  CreateBatchRequest: createBatchBody,
  CreateApiKeyRequest: createApiKeyBody,
  PutRateLimitRequest: putRateLimitBody,
  DeleteRateLimitRequest: deleteRateLimitBody,
  ResetOneRateLimitRequest: resetOneRateLimitBody,
  ResetRateLimitsRequest: resetRateLimitsBody,
  PutBudgetRequest: putBudgetBody,
  DeleteBudgetRequest: deleteBudgetBody,
  ChatCompletion: responses.chatCompletion,
  Response: responses.responseObject,
  EmbeddingList: responses.embeddingList,
  Transcription: responses.transcription,
  AnthropicMessage: responses.anthropicMessage,
  ModelList: responses.modelList,
  Health: responses.health,
  Readiness: responses.readiness,
  StatusOk: responses.statusOk,
  RuleStatus: responses.ruleStatusRecord,
  RateLimitList: responses.rateLimitList,
  BudgetStatus: responses.budgetStatusRecord,
  BudgetList: responses.budgetList,
  ApiKey: responses.apiKeyRecord,
  ApiKeyCreated: responses.apiKeyCreated,
  ApiKeyList: responses.apiKeyList,
  ApiKeyDeleted: responses.apiKeyDeleted,
  UsageSummary: responses.usageSummary,
  UsageBuckets: responses.usageBuckets,
  Explanation: responses.explanation,
  File: responses.fileObject,
  FileDeleted: responses.fileDeleted,
  Batch: responses.batchObject,
  BatchList: responses.batchList,
};

/** What a JSON body can be refused for before its handler runs: malformed, too large. */
const JSON_BODY_ERRORS: readonly ErrorStatus[] = [400, 413];
/** A model request: validation, unknown model, rate limits, the provider's failures. */
const MODEL_ERRORS: readonly ErrorStatus[] = [...JSON_BODY_ERRORS, 404, 429, 502, 503];

function modelEndpoint(operationId: string, summary: string, schema: z.ZodType, answer: z.ZodType, extra: Partial<OperationDoc> = {}): OperationDoc {
  return {
    operationId,
    summary,
    description: 'Rate limited by user-path, provider and model rules, then by the budgets of the user path; a non-streaming answer may come from the response cache (x-floodgate-cache: hit).',
    body: { schema },
    success: { status: 200, description: 'The provider\'s answer.', schema: answer, rateLimitHeaders: true },
    errors: MODEL_ERRORS,
    ...extra,
  };
}

/** An answer that is a stream of server-sent events when the body asks for `stream: true`. */
const streaming = (schema: z.ZodType) => ({ success: { status: 200, description: 'The provider\'s answer, or its stream.', schema, streams: true, rateLimitHeaders: true } });

/** An admin feature whose every answer is its whole list, and 503 while the feature is disabled. */
const listAdmin = (description: string, schema: z.ZodType) =>
  (operationId: string, summary: string, body: { schema: z.ZodType; examples: Readonly<Record<string, BodyExample>> } | undefined, errors: readonly ErrorStatus[]): OperationDoc => ({
    operationId,
    summary,
    ...(body !== undefined && { body }),
    success: { status: 200, description, schema },
    errors: [...errors, 503],
  });
const rateLimitAdmin = listAdmin('Every rule with its live counters.', responses.rateLimitList);
const budgetAdmin = listAdmin('Every budget with its spend in the current period.', responses.budgetList);

function dashboardPage(operationId: string): OperationDoc {
  return {
    operationId,
    summary: 'The operator dashboard (no key needed: it asks for the master key)',
    tag: 'dashboard',
    success: { status: 200, description: 'The page; 503 with a page saying how to build it when it is not built.', contentType: 'text/html' },
    errors: [],
  };
}

export const OPENAPI_OPERATIONS: OperationTable = {
  'GET /health': {
    operationId: 'getHealth',
    summary: 'Liveness (no key needed)',
    success: { status: 200, description: 'The gateway is up; "degraded" while shared rate-limit counters are unreachable.', schema: responses.health },
    errors: [],
  },
  'GET /ready': {
    operationId: 'getReadiness',
    summary: 'Readiness (no key needed)',
    description: 'Whether a load balancer should send this gateway traffic. 503 `{"status":"draining"}` from the moment a shutdown starts (the listener stays open for the requests running); 503 `{"status":"unavailable","reason":…}` while storage is unreachable, or Redis is with `on_error: deny`.',
    success: { status: 200, description: '`{"status":"ready"}`, with `degraded` when serving in a degraded mode.', schema: responses.readiness },
    otherAnswers: [{ status: 503, description: 'Draining for a shutdown, or unavailable (the reason says why).', schema: responses.readiness }],
    errors: [],
  },
  'GET /dashboard': dashboardPage('getDashboard'),
  'GET /dashboard/': dashboardPage('getDashboardSlash'),
  'GET /dashboard/assets/*': {
    operationId: 'getDashboardAsset',
    summary: 'The dashboard\'s scripts and styles (no key needed)',
    tag: 'dashboard',
    params: { path: 'The asset\'s file name (content-hashed).' },
    success: { status: 200, description: 'The file, cacheable for good.', contentType: '*/*' },
    errors: [404],
  },
  'GET /openapi.json': {
    operationId: 'getOpenApiDocument',
    summary: 'This document (no key needed)',
    success: { status: 200, description: 'The OpenAPI 3.1 document of every route.', contentType: 'application/json' },
    errors: [],
  },

  'POST /v1/chat/completions': modelEndpoint('createChatCompletion', 'Chat completion (OpenAI)', chatCompletionBody, responses.chatCompletion, streaming(responses.chatCompletion)),
  'POST /v1/responses': modelEndpoint('createResponse', 'Response (OpenAI Responses API)', responsesBody, responses.responseObject, streaming(responses.responseObject)),
  'POST /v1/embeddings': modelEndpoint('createEmbedding', 'Embeddings', embeddingsBody, responses.embeddingList),
  'POST /v1/audio/speech': modelEndpoint('createSpeech', 'Text to speech', speechBody, responses.audio, {
    success: { status: 200, description: 'The audio.', schema: responses.audio, contentType: 'audio/*', rateLimitHeaders: true },
  }),
  'POST /v1/audio/transcriptions': modelEndpoint('createTranscription', 'Speech to text', transcriptionForm, responses.transcription, {
    body: { schema: transcriptionForm, contentType: 'multipart/form-data' },
  }),
  'POST /v1/messages': modelEndpoint('createMessage', 'Messages (Anthropic)', anthropicMessagesBody, responses.anthropicMessage, { ...streaming(responses.anthropicMessage), anthropicErrors: true }),
  'GET /v1/models': {
    operationId: 'listModels',
    summary: 'Models and aliases',
    success: { status: 200, description: 'Every provider model (provider/model) and alias.', schema: responses.modelList },
    errors: [],
  },
  'GET /v1/realtime': {
    operationId: 'openRealtimeSession',
    summary: 'Realtime session (WebSocket)',
    description: 'Upgrade to a WebSocket proxied to the provider\'s realtime socket. The session counts as one request and holds one concurrency slot until it closes.',
    query: realtimeQuery,
    success: { status: 101, description: 'Switching protocols: the session is open.' },
    errors: [400, 404, 426, 429, 502],
  },
  'ALL /p/:provider/*': {
    operationId: 'passthrough',
    summary: 'Passthrough to a provider',
    description: 'Forwarded as is to the provider\'s base URL with its credentials; the path may not leave the base path. Only GET, POST, PUT, PATCH and DELETE are forwarded; any other method is a 405 and nothing is sent. Rate limited like model requests (model rules when a JSON body names a model).',
    tag: 'passthrough',
    params: { provider: 'A configured provider instance.', path: 'The path below the provider\'s base URL.' },
    body: { schema: z.unknown(), contentType: '*/*', required: false },
    success: { status: 200, description: 'The provider\'s answer, passed on with its status.', contentType: '*/*', rateLimitHeaders: true },
    errors: [400, 404, 405, 413, 429, 502],
  },

  'POST /v1/files': {
    operationId: 'uploadFile',
    summary: 'Upload a batch input file (JSONL)',
    description: 'Counts as one request against user-path rules and holds no concurrency slot. The caller\'s user path may hold at most `files.max_files_per_user_path` live files of `files.max_bytes_per_user_path` bytes in all; a file expires after `files.ttl_seconds`, or sooner with `expires_after`.',
    tag: 'batches',
    body: { schema: uploadFileForm, contentType: 'multipart/form-data' },
    success: { status: 200, description: 'The stored file.', schema: responses.fileObject, rateLimitHeaders: true },
    errors: [400, 403, 413, 429],
  },
  'GET /v1/files/:id': {
    operationId: 'getFile',
    summary: 'A stored file',
    tag: 'batches',
    success: { status: 200, description: 'The file.', schema: responses.fileObject },
    errors: [404],
  },
  'DELETE /v1/files/:id': {
    operationId: 'deleteFile',
    summary: 'Delete a stored file',
    description: 'Only a file of the caller\'s user path or below; a batch output kept at the provider is deleted there too.',
    tag: 'batches',
    success: { status: 200, description: 'Deleted.', schema: responses.fileDeleted },
    errors: [404, 502],
  },
  'GET /v1/files/:id/content': {
    operationId: 'getFileContent',
    summary: 'A stored file\'s bytes (batch input, output or errors)',
    tag: 'batches',
    success: { status: 200, description: 'The bytes.', contentType: 'application/octet-stream' },
    errors: [404],
  },
  'POST /v1/batches': {
    operationId: 'createBatch',
    summary: 'Submit a batch',
    description: 'Counts as one request against user-path rules and holds no concurrency slot.',
    tag: 'batches',
    body: { schema: createBatchBody },
    success: { status: 200, description: 'The batch.', schema: responses.batchObject, rateLimitHeaders: true },
    errors: [...JSON_BODY_ERRORS, 404, 429],
  },
  'GET /v1/batches': {
    operationId: 'listBatches',
    summary: 'The caller\'s batches',
    tag: 'batches',
    query: listBatchesQuery,
    success: { status: 200, description: 'A page of batches, newest first.', schema: responses.batchList },
    errors: [400],
  },
  'GET /v1/batches/:id': {
    operationId: 'getBatch',
    summary: 'A batch',
    tag: 'batches',
    success: { status: 200, description: 'The batch.', schema: responses.batchObject },
    errors: [404],
  },
  'POST /v1/batches/:id/cancel': {
    operationId: 'cancelBatch',
    summary: 'Cancel a batch',
    tag: 'batches',
    success: { status: 200, description: 'The batch, cancelling or cancelled.', schema: responses.batchObject },
    errors: [400, 404],
  },
  'GET /v1/usage': {
    operationId: 'getOwnUsage',
    summary: 'The caller\'s own usage, costs, rate limits and budgets',
    tag: 'usage',
    query: usageQuery,
    success: { status: 200, description: 'Usage and cost of the caller\'s user path and below, by provider and model, with the user-path rules and budgets governing it.', schema: responses.usageSummary },
    errors: [400],
  },

  'POST /admin/api-keys': {
    operationId: 'createApiKey',
    summary: 'Create a managed key',
    body: { schema: createApiKeyBody, examples: examples.CREATE_API_KEY_EXAMPLES },
    success: { status: 201, description: 'The key\'s record and its secret in `key`, shown once.', schema: responses.apiKeyCreated },
    errors: JSON_BODY_ERRORS,
  },
  'GET /admin/api-keys': {
    operationId: 'listApiKeys',
    summary: 'Managed keys (without secrets)',
    success: { status: 200, description: 'Every managed key.', schema: responses.apiKeyList },
    errors: [],
  },
  'DELETE /admin/api-keys/:id': {
    operationId: 'revokeApiKey',
    summary: 'Revoke a managed key',
    params: { id: 'The key\'s id.' },
    success: { status: 200, description: 'Revoked.', schema: responses.apiKeyDeleted },
    errors: [404],
  },
  'GET /admin/rate-limits': { ...rateLimitAdmin('listRateLimits', 'Every rule with its live counters', undefined, [400]), query: listRateLimitsQuery },
  'PUT /admin/rate-limits': rateLimitAdmin('putRateLimit', 'Create a rule or change its caps (counters kept)', { schema: putRateLimitBody, examples: examples.PUT_RATE_LIMIT_EXAMPLES }, [...JSON_BODY_ERRORS, 409]),
  'DELETE /admin/rate-limits': rateLimitAdmin('deleteRateLimit', 'Delete a rule and its counters', { schema: deleteRateLimitBody, examples: examples.DELETE_RATE_LIMIT_EXAMPLES }, [...JSON_BODY_ERRORS, 404, 409]),
  'POST /admin/rate-limits/reset-one': rateLimitAdmin('resetRateLimit', 'Reset one rule\'s counters', { schema: resetOneRateLimitBody, examples: examples.RESET_ONE_RATE_LIMIT_EXAMPLES }, [...JSON_BODY_ERRORS, 404]),
  'POST /admin/rate-limits/reset': {
    operationId: 'resetAllRateLimits',
    summary: 'Reset every rule\'s counters',
    body: { schema: resetRateLimitsBody, examples: examples.RESET_RATE_LIMITS_EXAMPLES },
    success: { status: 200, description: 'Every counter is back to zero.', schema: responses.statusOk },
    errors: [...JSON_BODY_ERRORS, 503],
  },
  'GET /admin/rate-limits/explain': {
    operationId: 'explainRequest',
    summary: 'Dry run: what a request would meet now',
    description: 'The targets the model resolves to and whether each has capacity, every rule that would apply with its counters, and the decision and breach a real request would get. Counts nothing and leaves an alias\'s rotation alone.',
    query: explainQuery,
    success: { status: 200, description: 'The explanation.', schema: responses.explanation },
    errors: [400, 404, 503],
  },
  'GET /admin/queue': {
    operationId: 'getQueue',
    summary: 'Requests waiting for capacity in this gateway',
    description: 'How many requests wait, by priority and by the rule they wait on (X-Floodgate-Max-Wait; docs/rate-limits.md).',
    success: { status: 200, description: 'The queue.', schema: responses.queueStatus },
    errors: [503],
  },
  'GET /admin/providers': {
    operationId: 'getLearnedCapacity',
    summary: 'What the providers\' answers said of their own rate limits',
    description: 'Per provider and model: the limits, remaining requests and tokens and their resets the upstream reported, cooldowns after its refusals, and whether it is routed around now (docs/rate-limits.md, "Capacity learned from the providers"). Shared by every replica on the Redis backend.',
    success: { status: 200, description: 'The learned capacity.', schema: responses.learnedCapacity },
    errors: [503],
  },
  'GET /admin/usage': {
    operationId: 'getUsageBuckets',
    summary: 'Everyone\'s usage in hour or day buckets',
    query: adminUsageQuery,
    success: { status: 200, description: 'Requests, tokens and cache hits per bucket and group.', schema: responses.usageBuckets },
    errors: [400],
  },
  'GET /admin/budgets': budgetAdmin('listBudgets', 'Every budget with its spend', undefined, []),
  'PUT /admin/budgets': budgetAdmin('putBudget', 'Create a budget or change its cap (spend kept)', { schema: putBudgetBody, examples: examples.PUT_BUDGET_EXAMPLES }, [...JSON_BODY_ERRORS, 409]),
  'DELETE /admin/budgets': budgetAdmin('deleteBudget', 'Delete a budget', { schema: deleteBudgetBody, examples: examples.DELETE_BUDGET_EXAMPLES }, [...JSON_BODY_ERRORS, 404, 409]),
  'GET /metrics': {
    operationId: 'getMetrics',
    summary: 'Prometheus metrics',
    description: 'The Prometheus text exposition format (see docs/operations.md for every series).',
    success: { status: 200, description: 'The metrics.', contentType: 'text/plain; version=0.0.4' },
    errors: [],
  },
};
