import { z } from 'zod';

const dateParam = z.string().regex(/^\d{4}-\d{2}-\d{2}(T[\d:.]+Z)?$/, { error: 'must be a date (YYYY-MM-DD) or an RFC 3339 UTC time' });

/** `GET /v1/usage?from&to` */
export const usageQuery = z.strictObject({ from: dateParam.optional(), to: dateParam.optional() });
