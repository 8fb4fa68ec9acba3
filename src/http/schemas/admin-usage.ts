import { z } from 'zod';

const day = z.iso.date({ error: 'must be a date (YYYY-MM-DD)' });

/** `GET /admin/usage?from&to&group_by&bucket` */
export const adminUsageQuery = z.strictObject({
  from: day.optional().meta({ description: 'First UTC day, included; default: six days before `to`.' }),
  to: day.optional().meta({ description: 'Last UTC day, included; default: today.' }),
  group_by: z
    .enum(['user_path', 'model', 'provider'], { error: 'must be one of user_path, model, provider' })
    .default('user_path')
    .meta({ description: '`model` groups by provider/model.' }),
  bucket: z.enum(['hour', 'day'], { error: 'must be hour or day' }).default('day').meta({ description: 'UTC hours (at most 31 days) or days (at most 366).' }),
});
