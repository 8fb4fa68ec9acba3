/**
 * Bodies of the budget admin API (`/admin/budgets`), with the conventions of the rate-limit admin
 * bodies: zod gives the shapes, the budgets module says what a path, a period and a cap mean.
 */
import { z } from 'zod';
import type { BudgetWrite } from '../../admin/budgets.ts';
import { parseBudgetPeriod } from '../../budgets/periods.ts';
import { parseMaxUsd, type BudgetKey } from '../../budgets/types.ts';
import { normalizeUserPath } from '../../user-path/user-path.ts';
import { checked, valueOf } from './checks.ts';

const userPath = z
  .string({ error: 'must be a string' })
  .meta({ description: 'The user path; the budget covers it and everything below it.' })
  .transform(checked((raw) => valueOf(normalizeUserPath(raw, 'user_path'), [])));

/** `{"period": "month"}` or `{"period_seconds": 3600}`, as the period's label. */
const limitKey = z
  .strictObject(
    {
      period: z
        .union([z.string(), z.number()], { error: 'must be a period name (day, week, month) or a number of seconds' })
        .optional()
        .meta({ description: 'day, week (ISO, from Monday) or month (calendar), in UTC; a number means seconds.' }),
      period_seconds: z
        .number({ error: 'must be a number' })
        .optional()
        // The budgets module checks it is whole, with its own message; the OpenAPI document says so.
        .meta({ type: 'integer', minimum: 1, description: 'A custom window of this many seconds, aligned to the Unix epoch.' }),
    },
    { error: 'must be an object with period or period_seconds' },
  )
  .transform(checked((pair) => {
    const about = pair.period === undefined && pair.period_seconds !== undefined ? 'period_seconds' : 'period';
    return valueOf(parseBudgetPeriod(pair.period, pair.period_seconds, 'limit_key.'), [about]);
  }));

const maxUsd = z
  .number({ error: 'must be a number' })
  .meta({ description: 'The cap in US dollars, greater than 0; reached when the spend is at least this.' })
  .transform(checked((raw) => valueOf(parseMaxUsd(raw), [])));

/** `PUT /admin/budgets`: creates a budget or changes its cap. */
export const putBudgetBody = z
  .strictObject({ user_path: userPath, limit_key: limitKey, max_usd: maxUsd })
  .transform((body): BudgetWrite => ({ userPath: body.user_path, period: body.limit_key, maxUsd: body.max_usd }));

/** `DELETE /admin/budgets`: the budget's key. */
export const deleteBudgetBody = z
  .strictObject({ user_path: userPath, limit_key: limitKey })
  .transform((body): BudgetKey => ({ userPath: body.user_path, period: body.limit_key }));
