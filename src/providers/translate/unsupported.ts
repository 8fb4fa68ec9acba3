/**
 * What a translation does with a request parameter its provider cannot honour (CONTRACT §13):
 * a 400 naming the parameter, never a silent drop, unless the instance has
 * `drop_unsupported: true`; then the parameter is dropped and its name logged once.
 */

/**
 * A request the translation cannot carry to the provider: answered as a 400
 * `invalid_request_error` with `param` set (the HTTP layer turns it into the gateway's error).
 */
export class UnsupportedParameterError extends Error {
  readonly param: string;
  readonly code: string;
  constructor(message: string, param: string, code = 'unsupported_parameter') {
    super(message);
    this.name = 'UnsupportedParameterError';
    this.param = param;
    this.code = code;
  }
}

export interface UnsupportedPolicy {
  /**
   * A parameter the provider cannot honour: throws `UnsupportedParameterError`, or, with
   * `drop_unsupported`, returns so the caller leaves the parameter out. `why` completes the
   * message ("... does not support logprobs: <why>").
   */
  unsupported(param: string, why?: string): void;
}

export interface UnsupportedPolicyOptions {
  provider: string;
  type: string;
  /** `providers.<name>.drop_unsupported`. */
  drop: boolean;
  /** Where the one line per dropped parameter name goes. */
  warn: (message: string) => void;
}

/** One policy per provider instance: it remembers which parameter names it already logged. */
export function unsupportedPolicy(options: UnsupportedPolicyOptions): UnsupportedPolicy {
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
      options.warn(`provider ${options.provider} (type ${options.type}): dropping unsupported parameter ${name}${reason} (drop_unsupported is on; logged once)`);
    },
  };
}
