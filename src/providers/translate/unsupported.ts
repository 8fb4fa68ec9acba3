import { SILENT_CONTEXT, UnsupportedParameterError, type ProviderContext } from '../types.ts';

/**
 * What a translation does with a request parameter its provider type cannot honour
 * (`providers.<name>.drop_unsupported`): refuse the request with a 400 naming the parameter
 * (the default), or leave the parameter out and say so in the log, once per parameter name.
 */
export interface UnsupportedPolicy {
  /**
   * `param` cannot be honoured: throws `UnsupportedParameterError`, or returns (the caller then
   * leaves it out) when unsupported parameters are dropped. `why` completes the message.
   */
  unsupported(param: string, why?: string): void;
}

export interface UnsupportedPolicyOptions {
  /** The provider instance and its type, for the message. */
  provider: string;
  type: string;
  /** `drop_unsupported`. */
  drop: boolean;
  context?: ProviderContext | undefined;
}

export function unsupportedPolicy(opts: UnsupportedPolicyOptions): UnsupportedPolicy {
  const context = opts.context ?? SILENT_CONTEXT;
  const logged = new Set<string>();
  return {
    unsupported(param, why) {
      const message = `${param} is not supported by provider ${opts.provider} (type ${opts.type})${why ? `: ${why}` : ''}`;
      if (!opts.drop) throw new UnsupportedParameterError(param, message);
      if (logged.has(param)) return;
      logged.add(param);
      context.warn({ provider: opts.provider, param }, `${message}; dropped (drop_unsupported), logged once`);
    },
  };
}
