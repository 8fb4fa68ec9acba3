/**
 * The server-side scripts of the Redis counter store. Each runs atomically on the Redis server,
 * on its clock (`TIME`), over keys that share one hash tag (see keys.ts), so the same scripts
 * run on Redis Cluster.
 *
 * They reproduce the memory store (src/counters/memory.ts) exactly:
 * - a windowed rule is a hash {ws, rp, rc, tp, tc}: the start of its current fixed window and the
 *   previous and current request and token counts. Windows are aligned to the epoch
 *   (`start = now - now % period`); one period on, current becomes previous; more, both restart;
 *   a clock that stepped back keeps the newer window. The key expires two periods after its
 *   window started, when nothing in it can matter any more.
 * - a concurrency rule is a sorted set of leases: member = lease id, score = expiry in ms. Expired
 *   leases are not counted and are pruned at admission; the key expires with its last lease.
 *
 * Replies are flat integer arrays: the server's time in seconds, an admitted flag, then six numbers
 * per rule: window start, requests previous and current, tokens previous and current, in flight.
 * The gateway computes the sliding estimates, Retry-After and headers from them with the same
 * code as for the memory store; the scripts compute the estimates only to check the caps.
 */

/** Helpers shared by the scripts that read windows. */
const WINDOW_FUNCTIONS = `
-- floor(previous * (period - elapsed) / period), exact for integers below 2^53 (Lua numbers are
-- doubles): previous = q * period + r splits the product into q * rest + floor(r * rest / period),
-- whose parts stay below 2^53 because r and rest are below period (at most 31,622,400).
local function carried(previous, period, elapsed)
  if previous == 0 then return 0 end
  local rest = period - elapsed
  local q = math.floor(previous / period)
  local r = previous - q * period
  if r < 0 then q = q - 1; r = r + period elseif r >= period then q = q + 1; r = r - period end
  return q * rest + math.floor(r * rest / period)
end

-- The window containing now: {start, ws, rp, rc, tp, tc, rolled}. start is the current window's
-- start, ws the stored window's after rolling (newer than start if the clock stepped back).
local function roll(key, period, now)
  local h = redis.call('HMGET', key, 'ws', 'rp', 'rc', 'tp', 'tc')
  local ws, rp, rc, tp, tc = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
  local start = now - now % period
  local rolled = false
  if start > ws then
    if start - ws == period then rp = rc; tp = tc else rp = 0; tp = 0 end
    rc = 0; tc = 0; ws = start; rolled = true
  end
  return {start, ws, rp, rc, tp, tc, rolled}
end

local function save(key, period, w)
  redis.call('HSET', key, 'ws', w[2], 'rp', w[3], 'rc', w[4], 'tp', w[5], 'tc', w[6])
  redis.call('EXPIREAT', key, w[2] + 2 * period)
end
`;

/** The clock: seconds, and milliseconds for lease expiries. */
const CLOCK = `
local time = redis.call('TIME')
local now = tonumber(time[1])
local nowMs = now * 1000 + math.floor(tonumber(time[2]) / 1000)
`;

/** A lease set lives at least as long as the lease just written into it (other replicas may use longer leases). */
const KEEP_FOR = `
local function keepFor(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
`;

/**
 * Admission. KEYS: one counter per matching rule. ARGV[1]: lease id, ARGV[2]: lease length in ms,
 * then per rule i: ARGV[3i] period seconds (0 = concurrency), ARGV[3i+1] request cap, ARGV[3i+2]
 * token cap (0 = none). Checks every rule; only if none is breached counts the request in every
 * window and adds the lease to every concurrency rule.
 */
export const ADMIT = `${WINDOW_FUNCTIONS}${KEEP_FOR}${CLOCK}
local lease, leaseMs = ARGV[1], tonumber(ARGV[2])
local n = #KEYS
local state = {}
local breached = false
for i = 1, n do
  local key = KEYS[i]
  local period, maxRequests, maxTokens = tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), tonumber(ARGV[3 * i + 2])
  if period == 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', nowMs)
    local inFlight = redis.call('ZCARD', key)
    if inFlight >= maxRequests then breached = true end
    state[i] = {inFlight}
  else
    local w = roll(key, period, now)
    local elapsed = now - w[1]
    if maxRequests > 0 and carried(w[3], period, elapsed) + w[4] >= maxRequests then breached = true end
    if maxTokens > 0 and carried(w[5], period, elapsed) + w[6] >= maxTokens then breached = true end
    state[i] = w
  end
end
local reply = {now, breached and 0 or 1}
for i = 1, n do
  local key, s = KEYS[i], state[i]
  local period = tonumber(ARGV[3 * i])
  if period == 0 then
    if not breached then
      redis.call('ZADD', key, nowMs + leaseMs, lease)
      keepFor(key, leaseMs)
      s[1] = s[1] + 1
    end
    for _, v in ipairs({0, 0, 0, 0, 0, s[1]}) do reply[#reply + 1] = v end
  else
    if not breached then
      s[4] = s[4] + 1
      if not s[7] then redis.call('HINCRBY', key, 'rc', 1) end
    end
    -- A roll is kept even on a refusal, as in memory: the counts stay those of the newest window.
    if s[7] then save(key, period, s) end
    for _, v in ipairs({s[1], s[3], s[4], s[5], s[6], 0}) do reply[#reply + 1] = v end
  end
end
return reply
`;

/**
 * Token charge. KEYS: the rules' counters. ARGV[1]: tokens, ARGV[1+i]: rule i's period. Only
 * windowed rules have token windows; concurrency rules are skipped.
 */
export const ADD_TOKENS = `${WINDOW_FUNCTIONS}${CLOCK}
local tokens = tonumber(ARGV[1])
for i = 1, #KEYS do
  local key, period = KEYS[i], tonumber(ARGV[1 + i])
  if period > 0 then
    local w = roll(key, period, now)
    if w[7] then
      w[6] = w[6] + tokens
      save(key, period, w)
    else
      redis.call('HINCRBY', key, 'tc', tokens)
    end
  end
end
return now
`;

/** Read without changing anything. KEYS: counters; ARGV[i]: rule i's period. Same reply as ADMIT. */
export const READ = `${WINDOW_FUNCTIONS}${CLOCK}
local reply = {now, 0}
for i = 1, #KEYS do
  local key, period = KEYS[i], tonumber(ARGV[i])
  local row
  if period == 0 then
    row = {0, 0, 0, 0, 0, redis.call('ZCOUNT', key, string.format('(%d', nowMs), '+inf')}
  else
    local h = redis.call('HMGET', key, 'ws', 'rp', 'rc', 'tp', 'tc')
    local ws, rp, rc, tp, tc = tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
    local start = now - now % period
    local shift = start - ws
    if shift <= 0 then row = {start, rp, rc, tp, tc, 0}
    elseif shift == period then row = {start, rc, 0, tc, 0, 0}
    else row = {start, 0, 0, 0, 0, 0} end
  end
  for _, v in ipairs(row) do reply[#reply + 1] = v end
end
return reply
`;

/** Release. KEYS: concurrency counters; ARGV[1]: the lease id to remove from each. */
export const RELEASE = `
for i = 1, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
return #KEYS
`;

/**
 * Lease renewal. KEYS[i] holds lease ARGV[i+1]; ARGV[1]: lease length in ms. Only leases still
 * present are extended (XX): a lease removed by a reset stays removed. Returns how many were found.
 */
export const RENEW = `${KEEP_FOR}${CLOCK}
local leaseMs = tonumber(ARGV[1])
local found = 0
for i = 1, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[i + 1]) then
    redis.call('ZADD', KEYS[i], 'XX', nowMs + leaseMs, ARGV[i + 1])
    keepFor(KEYS[i], leaseMs)
    found = found + 1
  end
end
return found
`;
