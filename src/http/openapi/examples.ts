/**
 * An example of every admin request body, shown in the OpenAPI document beside its schema
 * (test/http/openapi.test.ts checks that each one passes the schema that validates the body).
 */

export interface BodyExample {
  readonly summary: string;
  readonly value: unknown;
}

type Examples = Readonly<Record<string, BodyExample>>;

export const CREATE_API_KEY_EXAMPLES: Examples = {
  bound: { summary: 'A key for one consumer, bound to its user path', value: { name: 'alice laptop', user_path: '/team/alice' } },
  unbound: { summary: 'A key whose caller names its user path in the user-path header', value: { name: 'batch jobs' } },
  interactive: { summary: 'A key whose requests may ask for high priority (X-Floodgate-Priority)', value: { name: 'chat tool', user_path: '/research/chat', max_priority: 'high' } },
};

export const PUT_RATE_LIMIT_EXAMPLES: Examples = {
  windowed: { summary: '100 requests and 50,000 tokens a minute for everyone under /team, together', value: { user_path: '/team', limit_key: { period: 'minute' }, max_requests: 100, max_tokens: 50000 } },
  perChild: { summary: 'The same caps for each child of /team on its own', value: { user_path: '/team', limit_key: { period: 'minute' }, max_requests: 20, per_child: true } },
  concurrent: { summary: 'At most 20 requests in flight to provider openai', value: { scope: 'provider', subject: 'openai', limit_key: { period: 'concurrent' }, max_requests: 20 } },
  custom: { summary: 'A 5-minute token window on one model', value: { scope: 'model', subject: 'openai/gpt-4o', limit_key: { period_seconds: 300 }, max_tokens: 200000 } },
};

export const DELETE_RATE_LIMIT_EXAMPLES: Examples = {
  userPath: { summary: 'The minute rule of /team', value: { user_path: '/team', limit_key: { period: 'minute' } } },
  provider: { summary: 'The concurrency rule of provider openai', value: { scope: 'provider', subject: 'openai', limit_key: { period: 'concurrent' } } },
};

export const RESET_ONE_RATE_LIMIT_EXAMPLES: Examples = {
  period: { summary: 'The minute rule of /team, its period at the top level', value: { user_path: '/team', period: 'minute' } },
  limitKey: { summary: 'The same rule, keyed as PUT and DELETE key it', value: { user_path: '/team', limit_key: { period: 'minute' } } },
  custom: { summary: 'A custom window of a model rule', value: { scope: 'model', subject: 'openai/gpt-4o', period_seconds: 300 } },
};

export const RESET_RATE_LIMITS_EXAMPLES: Examples = {
  confirmed: { summary: 'Every counter back to zero', value: { confirmation: 'reset' } },
};

export const PUT_BUDGET_EXAMPLES: Examples = {
  month: { summary: '$200 a calendar month for /team and everything below it', value: { user_path: '/team', limit_key: { period: 'month' }, max_usd: 200 } },
  custom: { summary: 'Half a dollar an hour for one consumer', value: { user_path: '/team/alice', limit_key: { period_seconds: 3600 }, max_usd: 0.5 } },
};

export const DELETE_BUDGET_EXAMPLES: Examples = {
  month: { summary: 'The month budget of /team', value: { user_path: '/team', limit_key: { period: 'month' } } },
};
