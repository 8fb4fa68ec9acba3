import { SILENT_CONTEXT, UnsupportedParameterError, type ProviderContext } from '../types.ts';

/**
 * What a translation does with a request parameter its provider type cannot honour
 * (`providers.<name>.drop_unsupported`): a 400 naming the parameter (the default), never a silent
 * drop; with `drop_unsupported: true` the parameter is left out and its name logged once.
 */
export interface UnsupportedPolicy {
  /**
   * `param` cannot be honoured: throws `UnsupportedParameterError` (code `unsupported_parameter`),
   * or, with `drop_unsupported`, returns so the caller leaves the parameter out. `why` completes
   * the message ("... does not support logprobs: <why>").
   */
  unsupported(param: string, why?: string): void;
}

export interface UnsupportedPolicyOptions {
  /** The provider instance and its type, for the message. */
  provider: string;
  type: string;
  /** `providers.<name>.drop_unsupported`. */
  drop: boolean;
  /** Where the one line per dropped parameter name goes; none: nowhere. */
  context?: ProviderContext | undefined;
}

/** One policy per provider instance: it remembers which parameter names it already logged. */
export function unsupportedPolicy(options: UnsupportedPolicyOptions): UnsupportedPolicy {
  const context = options.context ?? SILENT_CONTEXT;
  const logged = new Set<string>();
  return {
    unsupported(param, why) {
      const reason = why === undefined ? '' : `: ${why}`;
      if (!options.drop) {
        throw new UnsupportedParameterError(
          `provider ${options.provider} (type ${options.type}) does not support ${param}${reason}; remove it, or set providers.${options.provider}.drop_unsupported: true to have it dropped`,
          param,
        );
      }
      // Array positions are not part of the name: `tools[3].type` is logged once as `tools[].type`.
      const name = param.replace(/\[\d+\]/g, '[]');
      if (logged.has(name)) return;
      logged.add(name);
      context.warn(
        { provider: options.provider, param: name },
        `provider ${options.provider} (type ${options.type}): dropping unsupported parameter ${name}${reason} (drop_unsupported is on; logged once)`,
      );
    },
  };
}
