import { z } from 'zod';

/** `GET /v1/realtime?model=` */
export const realtimeQuery = z.object({
  model: z
    .string({ error: 'required query parameter (GET /v1/realtime?model=...)' })
    .trim()
    .min(1, { error: 'required query parameter (GET /v1/realtime?model=...)' })
    .meta({ description: 'A model, provider/model or alias whose provider serves realtime sessions.' }),
});
