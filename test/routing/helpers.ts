/** Fake providers for the routing unit tests: nothing is ever called. */
import type { Provider, ProviderResult } from '../../src/providers/types.ts';
import { Resolver } from '../../src/routing/resolver.ts';
import type { Target } from '../../src/routing/types.ts';

function fakeProvider(name: string, models: string[] = []): Provider {
  return {
    name,
    type: 'openai',
    listModels: async () => models,
    call: async (): Promise<ProviderResult> => {
      throw new Error(`fake provider ${name} must not be called by routing`);
    },
    passthrough: async (): Promise<ProviderResult> => {
      throw new Error(`fake provider ${name} must not be called by routing`);
    },
    close: async () => {},
  };
}

/** Providers plus their model map, in configuration order. */
export function world(spec: Record<string, string[]>): { providers: Provider[]; models: Map<string, string[]> } {
  const providers = Object.entries(spec).map(([name, models]) => fakeProvider(name, models));
  return { providers, models: new Map(Object.entries(spec)) };
}

/** The target `provider/model` resolves to, on a provider serving only that model. */
export function directTarget(provider: string, model: string): Target {
  const { providers, models } = world({ [provider]: [model] });
  const route = new Resolver(providers, models).resolve(`${provider}/${model}`);
  if (route === undefined) throw new Error(`${provider}/${model} does not resolve`);
  return route.first;
}
