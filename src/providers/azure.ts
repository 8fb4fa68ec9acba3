import { z } from 'zod';
import { booleanSetting, coerceString, str, urlSetting } from '../shared/config-fields.ts';
import { OPENAI_PATHS, OpenAIProvider, type Credentials, type OpenAIEndpoint } from './openai.ts';
import type { Json } from './translate/json.ts';
import { messagesToChat, type ChatTarget } from './translate/messages-to-chat.ts';
import { unsupportedPolicy, type UnsupportedPolicy } from './translate/unsupported.ts';
import type { BatchAbility, ProviderCall, ProviderContext, ProviderResult, ProviderSettings } from './types.ts';
import { defineProviderType, UpstreamUnavailableError } from './types.ts';

const DEFAULT_API_VERSION = '2024-10-21';
/** The GA api-versions have no realtime; the first preview that has it. */
const DEFAULT_REALTIME_API_VERSION = '2024-10-01-preview';
const DEFAULT_AUTHORITY_HOST = 'https://login.microsoftonline.com';
/** The scope of a token for Azure OpenAI (Cognitive Services) data-plane calls. */
const ENTRA_SCOPE = 'https://cognitiveservices.azure.com/.default';

const text = () => z.preprocess(coerceString, str().min(1, { error: 'must not be empty' }));

/** Microsoft's identity library refuses a plain-http authority: said here, at start. */
const httpsUrl = () => urlSetting().refine((v) => v.startsWith('https://'), { error: 'must be an https URL' });

const entraFields = z.strictObject({
  tenant_id: text(),
  client_id: text(),
  client_secret: text(),
  authority_host: httpsUrl().optional(),
});

const azureFields = {
  base_url: urlSetting(),
  api_version: z.preprocess(coerceString, str().default(DEFAULT_API_VERSION)),
  realtime_api_version: z.preprocess(coerceString, str().default(DEFAULT_REALTIME_API_VERSION)),
  deployments: z.record(z.string(), text(), { error: 'must be a mapping of model names to deployment names' }).optional(),
  entra: entraFields.optional(),
  drop_unsupported: booleanSetting(false),
};

export type AzureSettings = ProviderSettings<typeof azureFields>;

const AZURE_CHAT: ChatTarget = { topK: false, reasoningEffort: true };

/**
 * `type: azure`: Azure OpenAI. `base_url` is the resource (`https://<resource>.openai.azure.com`);
 * a model's calls go to its deployment (`deployments`, else the model's own name) with the
 * `api-version` query; credentials are `api_key` (sent as `api-key`) or an Entra ID app (`entra`).
 */
export const azureProviderType = defineProviderType({
  type: 'azure',
  configFields: azureFields,
  create: (name, settings, context) => new AzureProvider(name, settings, context),
  check: (settings) => {
    const problems: Array<{ key: string; message: string }> = [];
    const hasKey = settings.api_key !== undefined && settings.api_key !== '';
    if (hasKey && settings.entra !== undefined) problems.push({ key: 'entra', message: 'give api_key or entra, not both' });
    if (!hasKey && settings.entra === undefined) problems.push({ key: 'api_key', message: 'required (or entra: {tenant_id, client_id, client_secret})' });
    if ((settings.models ?? []).length === 0 && Object.keys(settings.deployments ?? {}).length === 0) {
      problems.push({ key: 'models', message: 'required (or deployments): Azure OpenAI has no model discovery for deployments' });
    }
    return problems;
  },
  pricesProvider: 'azure',
});

/** Azure OpenAI: the OpenAI dialect at per-deployment paths, with its own credentials. */
class AzureProvider extends OpenAIProvider {
  override readonly type = 'azure';
  /** Batch lines run by the gateway, each a deployment call (Azure's own batch API is not forwarded). */
  override readonly batch: BatchAbility = { mode: 'lines' };
  private readonly apiVersion: string;
  private readonly realtimeApiVersion: string;
  private readonly deployments: Readonly<Record<string, string>>;
  private readonly models: string[];
  private readonly fixedCredentials: Readonly<Record<string, string>> | undefined;
  private readonly token: (() => Promise<string>) | undefined;
  private readonly policy: UnsupportedPolicy;

  constructor(name: string, settings: AzureSettings, context?: ProviderContext) {
    super(name, settings);
    this.apiVersion = settings.api_version;
    this.realtimeApiVersion = settings.realtime_api_version;
    this.deployments = settings.deployments ?? {};
    this.models = [...new Set([...(settings.models ?? []), ...Object.keys(this.deployments)])];
    this.policy = unsupportedPolicy({ provider: name, type: 'azure', drop: settings.drop_unsupported, context });
    const entra = settings.entra;
    if (entra === undefined) {
      this.fixedCredentials = Object.freeze<Record<string, string>>(settings.api_key ? { 'api-key': settings.api_key } : {});
    } else {
      this.token = entraTokens(entra);
    }
  }

  override async listModels(): Promise<string[]> {
    return [...this.models];
  }

  override async call(call: ProviderCall): Promise<ProviderResult> {
    // The Responses API is not below a deployment: the deployment is named in the body.
    if (call.endpoint === 'responses') return super.call({ ...call, json: { ...call.json, model: this.deploymentOf(call.model) }, jsonBytes: undefined });
    return super.call(call);
  }

  /** Messages → chat with Azure's unsupported policy: Azure's chat has reasoning effort, no `top_k`. */
  protected override messagesToChat(msg: Json): Json {
    return messagesToChat(msg, this.policy, AZURE_CHAT);
  }

  protected override endpointPath(endpoint: OpenAIEndpoint, model: string): string {
    const query = `?api-version=${encodeURIComponent(this.apiVersion)}`;
    if (endpoint === 'responses') return `/openai${OPENAI_PATHS.responses}${query}`;
    return `/openai/deployments/${encodeURIComponent(this.deploymentOf(model))}${OPENAI_PATHS[endpoint]}${query}`;
  }

  protected override credentials(): Credentials {
    if (this.fixedCredentials !== undefined) return this.fixedCredentials;
    return this.bearer();
  }

  protected override async realtimeEndpoint(model: string): Promise<{ url: string; headers: Record<string, string> }> {
    const url = new URL(`${this.client.baseUrl}/openai/realtime`);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('api-version', this.realtimeApiVersion);
    url.searchParams.set('deployment', this.deploymentOf(model));
    return { url: url.toString(), headers: { ...(await this.credentials()) } };
  }

  private deploymentOf(model: string): string {
    return this.deployments[model] ?? model;
  }

  private async bearer(): Promise<Readonly<Record<string, string>>> {
    try {
      return { authorization: `Bearer ${await this.token!()}` };
    } catch (err) {
      const detail = err instanceof Error ? err.message.split('\n')[0] : String(err);
      throw new UpstreamUnavailableError(this.name, `provider ${this.name}: no Microsoft Entra ID token: ${detail}`, 502, { cause: err });
    }
  }
}

/**
 * Tokens for an Entra ID app from Microsoft's identity library, loaded on the first request (a
 * gateway without Entra never loads it). The library's token cycler keeps one token and renews it
 * in the background from two minutes before it expires.
 */
function entraTokens(entra: NonNullable<AzureSettings['entra']>): () => Promise<string> {
  let tokens: Promise<() => Promise<string>> | undefined;
  return async () => {
    tokens ??= import('@azure/identity').then(({ ClientSecretCredential, getBearerTokenProvider }) => {
      const credential = new ClientSecretCredential(entra.tenant_id, entra.client_id, entra.client_secret, {
        authorityHost: entra.authority_host ?? DEFAULT_AUTHORITY_HOST,
        // Otherwise the library asks Microsoft's public cloud about the authority first.
        disableInstanceDiscovery: true,
      });
      return getBearerTokenProvider(credential, ENTRA_SCOPE);
    });
    return (await tokens)();
  };
}
