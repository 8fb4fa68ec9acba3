import { DefinitionChangeError } from '../../admin/definitions.ts';
import { GatewayError, badRequest, notFound } from '../../errors/gateway-error.ts';
import { leadingField } from '../schemas/checks.ts';

/**
 * Runs a change of rules or budgets, answering a refusal as the admin API's conventions say: 404
 * with `codes.notFound`, 409 with `codes.managedByConfig` for a config definition, else a 400 naming
 * the field the message begins with.
 */
export async function definitionChange(action: () => Promise<void>, codes: { notFound: string; managedByConfig: string }): Promise<void> {
  try {
    await action();
  } catch (err) {
    if (!(err instanceof DefinitionChangeError)) throw err;
    if (err.reason === 'not_found') throw notFound(err.message, codes.notFound);
    if (err.reason === 'managed_by_config') {
      throw new GatewayError({ status: 409, type: 'invalid_request_error', message: err.message, code: codes.managedByConfig });
    }
    throw badRequest(err.message, leadingField(err.message) ?? null);
  }
}
