import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertErrors, errorsOf, load } from './helpers.ts';

describe('config schema: defaults', () => {
  it('an empty file yields every default', () => {
    const { config, rateLimitSeeds, budgetSeeds, warnings } = load('');
    assert.deepEqual(config, {
      server: {
        host: '127.0.0.1', port: 8080, user_path_header: 'X-Floodgate-User-Path', body_limit: 10 * 1024 * 1024, shutdown_grace_seconds: 10,
        headers_timeout_seconds: 30, request_timeout_seconds: 300, keep_alive_timeout_seconds: 72, max_connections: 10000,
      },
      storage: { type: 'sqlite', sqlite: { path: 'data/floodgate.db' }, postgres: {} },
      usage: { enabled: true },
      logging: { access: false },
      files: { ttl_seconds: 30 * 86400, max_bytes_per_user_path: 1024 ** 3, max_files_per_user_path: 1000 },
      cache: { response: { enabled: false, ttl_seconds: 300, max_entries: 10000, shared: false } },
      providers: {},
      aliases: {},
      failover: {},
      rate_limits: {
        enabled: true,
        reservations: { enabled: false, default_completion_tokens: 256 },
        backend: 'memory',
        redis: { url: 'redis://127.0.0.1:6379', prefix: 'floodgate:', lease_seconds: 30, timeout_ms: 250, on_error: 'local' },
        queue: { default_wait_seconds: 0, max_wait_seconds: 30, max_depth: 10000, headroom: { normal: 0, low: 0 } },
        max_children: 100000,
        persist_counters: false,
        user_paths: [],
        providers: [],
        models: [],
      },
      pricing: {},
      budgets: { enabled: true, refresh_seconds: 5, reservations: { enabled: false }, user_paths: [] },
    });
    assert.deepEqual(rateLimitSeeds, []);
    assert.deepEqual(budgetSeeds, []);
    assert.deepEqual(warnings, []);
  });

  it('bare section keys (YAML nulls) also take defaults', () => {
    const { config } = load('server:\nstorage:\nproviders:\nrate_limits:\n  user_paths:\n');
    assert.equal(config.server.port, 8080);
    assert.deepEqual(config.providers, {});
    assert.deepEqual(config.rate_limits.user_paths, []);
  });

  it('parses body_limit sizes into bytes', () => {
    assert.equal(load('server: { body_limit: 2048 }').config.server.body_limit, 2048);
    assert.equal(load('server: { body_limit: "512" }').config.server.body_limit, 512);
    assert.equal(load('server: { body_limit: 64kb }').config.server.body_limit, 64 * 1024);
    assert.equal(load('server: { body_limit: 3MB }').config.server.body_limit, 3 * 1024 * 1024);
    assert.equal(load('server: { body_limit: 1gb }').config.server.body_limit, 1024 ** 3);
    assertErrors('server: { body_limit: 1tb }', ['server.body_limit: must be a size in bytes: <n>, <n>kb, <n>mb or <n>gb (e.g. 10mb)']);
    assertErrors('server: { body_limit: 0 }', ['server.body_limit: must be a size in bytes: <n>, <n>kb, <n>mb or <n>gb (e.g. 10mb)']);
  });

  it('connection bounds take whole seconds and a count', () => {
    const { config } = load('server: { headers_timeout_seconds: 5, request_timeout_seconds: 60, keep_alive_timeout_seconds: 10, max_connections: 200 }');
    assert.deepEqual(
      [config.server.headers_timeout_seconds, config.server.request_timeout_seconds, config.server.keep_alive_timeout_seconds, config.server.max_connections],
      [5, 60, 10, 200],
    );
    assertErrors('server: { headers_timeout_seconds: 120, request_timeout_seconds: 60 }', ['server.headers_timeout_seconds: must not exceed request_timeout_seconds (60)']);
    assertErrors('server: { keep_alive_timeout_seconds: 0 }', ['server.keep_alive_timeout_seconds: must be an integer 1..3600']);
    assertErrors('server: { max_connections: lots }', ['server.max_connections: must be an integer 1..1000000']);
  });

  it('file limits and provider size caps take whole seconds, counts and sizes', () => {
    const { config } = load(`
files: { ttl_seconds: 3600, max_bytes_per_user_path: 50mb, max_files_per_user_path: 10 }
providers:
  up: { type: openai, base_url: "http://127.0.0.1:1/v1", max_response_bytes: 2mb, max_event_bytes: 256kb }
`);
    assert.deepEqual(config.files, { ttl_seconds: 3600, max_bytes_per_user_path: 50 * 1024 * 1024, max_files_per_user_path: 10 });
    assert.equal(config.providers['up']?.max_response_bytes, 2 * 1024 * 1024);
    assert.equal(config.providers['up']?.max_event_bytes, 256 * 1024);
    assertErrors('files: { max_bytes_per_user_path: -1 }', ['files.max_bytes_per_user_path: must be a size in bytes: <n>, <n>kb, <n>mb or <n>gb (e.g. 10mb)']);
    assertErrors('files: { ttl_seconds: forever }', ['files.ttl_seconds: must be an integer 1..31622400']);
    assertErrors('providers:\n  up: { type: mock, max_event_bytes: 1kib }', ['providers.up.max_event_bytes: must be a size in bytes: <n>, <n>kb, <n>mb or <n>gb (e.g. 10mb)']);
  });

  it('learned capacity: per provider, on by default, with a reserve and a cooldown; bad values named', () => {
    const { config } = load(`
providers:
  up: { type: openai, base_url: "http://127.0.0.1:1/v1", learned: { reserve: 5, cooldown_seconds: 2.5 } }
  off: { type: mock, learned: { enabled: false } }
`);
    assert.deepEqual(config.providers['up']?.learned, { enabled: true, reserve: 5, cooldown_seconds: 2.5 });
    assert.deepEqual(config.providers['off']?.learned, { enabled: false, reserve: 0, cooldown_seconds: 5 });
    assertErrors('providers:\n  up: { type: mock, learned: { reserve: -1 } }', ['providers.up.learned.reserve: must be an integer >= 0']);
    assertErrors('providers:\n  up: { type: mock, learned: { cooldown_seconds: 90000 } }', ['providers.up.learned.cooldown_seconds: must be a number from 0 to 86400']);
    assertErrors('providers:\n  up: { type: mock, learned: { enabled: sometimes } }', ['providers.up.learned.enabled: must be a boolean (true/false/yes/no/on/off/1/0)']);
    assertErrors('providers:\n  up: { type: mock, learned: { cooldown: 3 } }', ['providers.up.learned.cooldown: unknown key']);
  });

  it('provider defaults: anthropic base_url, /v1 stripped, trailing slash dropped, timeouts', () => {
    const { config } = load(`
providers:
  claude: { type: anthropic }
  claude-eu: { type: anthropic, base_url: "https://eu.example.com/v1/" }
  openai: { type: openai, base_url: "https://api.openai.com/v1/", models: [gpt-4o-mini], timeout_ms: 5000 }
  local: { type: mock }
`);
    assert.deepEqual(config.providers['claude'], {
      type: 'anthropic',
      base_url: 'https://api.anthropic.com',
      connect_timeout_ms: 10000,
      timeout_ms: 600000,
      max_response_bytes: 64 * 1024 * 1024,
      max_event_bytes: 16 * 1024 * 1024,
      learned: { enabled: true, reserve: 0, cooldown_seconds: 5 },
    });
    assert.equal((config.providers['claude-eu'] as { base_url?: string } | undefined)?.base_url, 'https://eu.example.com');
    assert.deepEqual(config.providers['openai'], {
      type: 'openai',
      base_url: 'https://api.openai.com/v1',
      models: ['gpt-4o-mini'],
      connect_timeout_ms: 10000,
      timeout_ms: 5000,
      max_response_bytes: 64 * 1024 * 1024,
      max_event_bytes: 16 * 1024 * 1024,
      learned: { enabled: true, reserve: 0, cooldown_seconds: 5 },
    });
    assert.equal(config.providers['local']?.type, 'mock');
  });

  it('aliases: default strategy, string targets become { model, weight: 1 }', () => {
    const { config } = load(`
providers: { openai: { type: openai, base_url: "https://x.test/v1" }, backup: { type: mock } }
aliases:
  fast:
    targets: [openai/gpt-4o-mini, { model: backup/gpt-4o-mini, weight: 2 }]
  pick: { strategy: first, targets: [gpt-4o] }
`);
    assert.deepEqual(config.aliases['fast'], {
      strategy: 'round_robin',
      targets: [
        { model: 'openai/gpt-4o-mini', weight: 1 },
        { model: 'backup/gpt-4o-mini', weight: 2 },
      ],
    });
    assert.equal(config.aliases['pick']?.strategy, 'first');
  });

  it('normalises rate-limit user paths', () => {
    const { config } = load(`
rate_limits:
  user_paths:
    - { path: " team//a/ ", limits: [ { period: minute, max_requests: 1 } ] }
    - { path: "", limits: [ { period: minute, max_requests: 1 } ] }
`);
    assert.deepEqual(config.rate_limits.user_paths.map((u) => u.path), ['/team/a', '/']);
  });
});

describe('config schema: errors name the key path', () => {
  it('unknown keys at every level, with the known key they are closest to', () => {
    assertErrors(
      `
serverr: {}
server: { prot: 1 }
providers:
  openai: { type: openai, base_url: "https://x.test", base_ur: "https://x.test" }
cache: { response: { enable: true } }
rate_limits:
  user_paths: [ { path: /a, limits: [ { period: minute, max_requests: 1, max_request: 2 } ], extra: 1 } ]
`,
      [
        'serverr: unknown key (did you mean "server"?)',
        'server.prot: unknown key (did you mean "port"?)',
        'providers.openai.base_ur: unknown key (did you mean "base_url"?)',
        'cache.response.enable: unknown key (did you mean "enabled"?)',
        'rate_limits.user_paths[0].limits[0].max_request: unknown key (did you mean "max_requests"?)',
        'rate_limits.user_paths[0].extra: unknown key',
      ],
    );
  });

  it('wrong types', () => {
    assertErrors(
      `
server: { host: [a], port: abc, master_key: { a: 1 } }
usage: { enabled: maybe }
providers: { p: 5, q: { type: openai, base_url: "https://x.test", models: gpt } }
aliases: { fast: { targets: fast } }
rate_limits: { user_paths: [ { path: /a, limits: [ 5 ] } ] }
`,
      [
        'server.host: must be a string',
        'server.port: must be an integer 0..65535',
        'server.master_key: must be a string',
        'usage.enabled: must be a boolean (true/false/yes/no/on/off/1/0)',
        'providers.p: expected a mapping',
        'providers.q.models: must be a list of model names',
        'aliases.fast.targets: must be a list',
        'rate_limits.user_paths[0].limits[0]: expected a mapping such as { period: minute, max_requests: 100 }',
      ],
    );
  });

  it('out-of-range numbers', () => {
    assertErrors(
      `
server: { port: 65536 }
cache: { response: { ttl_seconds: 0, max_entries: 1.5 } }
providers: { p: { type: mock, timeout_ms: -1 } }
rate_limits:
  user_paths:
    - path: /a
      limits: [ { period: minute, max_requests: 1 }, { period: minute, max_requests: 0 } ]
`,
      [
        'server.port: must be an integer 0..65535',
        'cache.response.ttl_seconds: must be an integer >= 1',
        'cache.response.max_entries: must be an integer >= 1',
        'providers.p.timeout_ms: must be an integer >= 1',
        'rate_limits.user_paths[0].limits[1].max_requests: must be an integer 1..9007199254740991',
      ],
    );
    assert.equal(load('server: { port: 0 }').config.server.port, 0);
  });

  it('limit rules: bad period, both period kinds, concurrent with tokens, windowed without caps', () => {
    assertErrors(
      `
rate_limits:
  user_paths:
    - path: /a
      limits:
        - { period: week, max_requests: 1 }
        - { period: minute, period_seconds: 60, max_requests: 1 }
        - { max_requests: 1 }
        - { period: concurrent, max_requests: 1, max_tokens: 5 }
        - { period: concurrent, max_tokens: 5 }
        - { period: hour }
        - { period_seconds: 0, max_requests: 1 }
        - { period_seconds: 300, max_tokens: 0 }
`,
      [
        'rate_limits.user_paths[0].limits[0].period: must be one of minute, hour, day, concurrent (use period_seconds for a custom window)',
        'rate_limits.user_paths[0].limits[1]: set either period or period_seconds, not both',
        'rate_limits.user_paths[0].limits[2]: period or period_seconds is required',
        'rate_limits.user_paths[0].limits[3].max_tokens: not allowed on a concurrent limit',
        'rate_limits.user_paths[0].limits[4].max_requests: required for a concurrent limit',
        'rate_limits.user_paths[0].limits[4].max_tokens: not allowed on a concurrent limit',
        'rate_limits.user_paths[0].limits[5]: a windowed limit needs max_requests and/or max_tokens',
        'rate_limits.user_paths[0].limits[6].period_seconds: must be an integer 1..31622400',
        'rate_limits.user_paths[0].limits[7].max_tokens: must be an integer 1..9007199254740991',
      ],
    );
  });

  it('limits missing', () => {
    assertErrors('rate_limits: { providers: [ { name: openai } ] }', ['rate_limits.providers[0].limits: required']);
  });

  it('invalid subjects', () => {
    assertErrors(
      `
rate_limits:
  user_paths: [ { path: "/a/../b", limits: [] }, { path: "/a:b", limits: [] } ]
  providers: [ { name: "a/b", limits: [] } ]
  models: [ { model: "/gpt", limits: [] } ]
`,
      [
        `rate_limits.user_paths[0].path: "/a/../b" must not contain '.' or '..' segments`,
        `rate_limits.user_paths[1].path: "/a:b" must not contain ':'`,
        `rate_limits.providers[0].name: "a/b" must be a provider name without '/' or whitespace`,
        `rate_limits.models[0].model: "/gpt" must not begin or end with '/'`,
      ],
    );
  });

  it('providers: names, types, base_url', () => {
    assertErrors(
      `
providers:
  "open ai": { type: mock }
  a: { type: openai }
  b: { type: palm }
  c: {}
  d: { type: openai, base_url: "ftp://x" }
`,
      [
        'providers["open ai"]: invalid provider name "open ai": use letters, digits, ".", "_" and "-" (no "/" or whitespace), starting with a letter or digit',
        'providers.a.base_url: required',
        'providers.b.type: must be one of openai, anthropic, azure, bedrock, gemini, vertex, mock',
        'providers.c.type: required (one of openai, anthropic, azure, bedrock, gemini, vertex, mock)',
        'providers.d.base_url: must be an http(s) URL (got "ftp://x")',
      ],
    );
  });

  it('aliases and failover shapes', () => {
    assertErrors(
      `
aliases:
  "openai/gpt-4o": { targets: [x] }
  empty: { targets: [] }
  bad: { strategy: random, targets: [ { model: x, weight: 0 }, 7, { model: y, extra: 1 } ] }
failover:
  x: []
`,
      [
        'aliases.openai/gpt-4o: invalid alias name "openai/gpt-4o": must not contain "/" (it would read as provider/model)',
        'aliases.empty.targets: must list at least one target',
        'aliases.bad.strategy: must be one of round_robin, weighted, first',
        'aliases.bad.targets[0].weight: must be an integer >= 1',
        'aliases.bad.targets[1]: expected "provider/model" or { model, weight }',
        'aliases.bad.targets[2].extra: unknown key',
        'failover.x: must list at least one candidate',
      ],
    );
  });

  it('storage: postgres needs a url', () => {
    assertErrors('storage: { type: postgres }', [
      'storage.postgres.url: required when storage.type is postgres (set it here or with POSTGRES_URL)',
    ]);
    assertErrors('storage: { type: mysql }', ['storage.type: must be one of sqlite, postgres']);
    const { config } = load('storage: { type: postgres, postgres: { url: "postgres://u@h/db" } }');
    assert.equal(config.storage.postgres.url, 'postgres://u@h/db');
  });

  it('a non-mapping file is an error', () => {
    assertErrors('- a\n- b\n', ['(root): the configuration file must be a YAML mapping']);
  });

  it('reports many errors together', () => {
    const errors = errorsOf(`
server: { port: -1, nope: 1 }
providers: { x: { type: openai } }
rate_limits: { user_paths: [ { path: /a, limits: [ { period: day } ] } ] }
`);
    assert.equal(errors.length, 4);
  });
});
