import { anthropicProviderType } from './anthropic.ts';
import { azureProviderType } from './azure.ts';
import { bedrockProviderType } from './bedrock.ts';
import { geminiProviderType } from './gemini.ts';
import { mockProviderType } from './mock.ts';
import { openaiProviderType } from './openai.ts';
import { SILENT_CONTEXT, type Provider, type ProviderContext, type ProviderSettings, type ProviderType } from './types.ts';
import { vertexProviderType } from './vertex.ts';

/**
 * Every provider type the gateway knows, in the order `check-config` and error messages name them.
 * A new type is one module exporting its `ProviderType` plus its entry here: the config schema,
 * the type names and the factory below all follow from this list.
 */
export const PROVIDER_TYPES = [
  openaiProviderType, anthropicProviderType, azureProviderType, bedrockProviderType, geminiProviderType, vertexProviderType, mockProviderType,
] as const;

type Entry = (typeof PROVIDER_TYPES)[number];

/** A `providers.<name>` entry: its type's name, its own fields and the common ones. */
export type ProviderConfig = Entry extends infer E
  ? E extends ProviderType<infer Name, infer Fields> ? { type: Name } & ProviderSettings<Fields> : never
  : never;

type Factory = (name: string, config: ProviderConfig, context: ProviderContext) => Provider;

// Each factory is given only configs its own type's schema produced (`type` selects it), which is
// what the casts state and the union type cannot.
const FACTORIES = new Map<string, Factory>(PROVIDER_TYPES.map((t) => [t.type, t.create as Factory]));

function createProvider(name: string, config: ProviderConfig, context: ProviderContext): Provider {
  const create = FACTORIES.get(config.type);
  if (create === undefined) throw new Error(`providers.${name}.type: unknown provider type ${JSON.stringify(config.type)}`);
  return create(name, config, context);
}

/** The `pricesProvider` of a provider type (see `ProviderType`); undefined for an unknown type. */
export function pricesProviderOf(type: string): string | null | undefined {
  return PROVIDER_TYPES.find((t) => t.type === type)?.pricesProvider;
}

/** Instances in config order (the order decides which provider serves a bare model name). */
export function createProviders(map: Readonly<Record<string, ProviderConfig>>, context: ProviderContext = SILENT_CONTEXT): Provider[] {
  return Object.entries(map).map(([name, config]) => createProvider(name, config, context));
}
