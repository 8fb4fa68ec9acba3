/**
 * The server-side scripts of the Redis counter store. Each runs atomically on the Redis server,
 * on its clock (`TIME`), over keys that share one hash tag (see keys.ts), so the same scripts
 * run on Redis Cluster (Redis 6.2 or later: SET ... EXAT).
 *
 * They reproduce the memory store (src/counters/memory.ts) exactly:
 * - a windowed rule is a string of five little-endian doubles: the start of its current fixed
 *   window, then the previous and current request counts and the previous and current token
 *   counts. Windows are aligned to the epoch (`start = now - now % period`); one period on,
 *   current becomes previous; more, both restart; a clock that stepped back keeps the newer
 *   window. The key expires two periods after its window started, when nothing in it can matter
 *   any more.
 * - a concurrency rule is a sorted set of leases: member = lease id, score = expiry in ms. Expired
 *   leases are not counted, and the renewals prune them; the key expires with its last lease.
 *
 * The counter operations of a gateway (admissions, token charges, releases, reads) travel in
 * batches: BATCH applies every operation of one event-loop turn in order, each one atomic like
 * the whole script. Numbers travel both ways, and are stored, as doubles (exact for integers below
 * 2^53): Lua formats and parses decimal numbers slowly, and a hash costs a Lua table per read,
 * where one MGET reads every window of an admission; the scripts run on the one Redis all
 * gateways share. An admission's (and a read's) answer is the server's time in seconds, an
 * admitted flag, then six numbers per rule: window start, requests previous and current, tokens
 * previous and current, in flight. The gateway computes the sliding estimates, Retry-After and
 * headers from them with the same code as for the memory store; the script computes the
 * estimates only to check the caps.
 */

/** Sliding-window helpers. */
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

-- A stored window as ws, rp, rc, tp, tc; zeros for a missing key (or one this script did not write).
local function decode(raw)
  if type(raw) == 'string' and #raw == 40 then
    local ws, rp, rc, tp, tc = struct.unpack('<ddddd', raw)
    return ws, rp, rc, tp, tc
  end
  return 0, 0, 0, 0, 0
end

-- The window containing now, from the stored one: start (of the current window), then ws, rp, rc,
-- tp, tc after rolling (ws newer than start if the clock stepped back), and whether it rolled.
local function roll(raw, period, now)
  local ws, rp, rc, tp, tc = decode(raw)
  local start = now - now % period
  if start > ws then
    if start - ws == period then rp = rc; tp = tc else rp = 0; tp = 0 end
    return start, start, rp, 0, tp, 0, true
  end
  return start, ws, rp, rc, tp, tc, false
end

-- Writes a window back: a rolled one with its new expiry, else keeping the expiry it has.
local function save(key, period, rolled, ws, rp, rc, tp, tc)
  local value = struct.pack('<ddddd', ws, rp, rc, tp, tc)
  if rolled then redis.call('SET', key, value, 'EXAT', ws + 2 * period)
  else redis.call('SET', key, value, 'KEEPTTL') end
end

-- The stored windows of the windowed rules among keys first+1 .. first+n, in one MGET (nil for
-- the concurrency rules, whose periods are 0).
local function windows(first, n, periodOf)
  local names, at = {}, {}
  for i = 1, n do
    if periodOf(i) > 0 then
      names[#names + 1] = KEYS[first + i]
      at[i] = #names
    end
  end
  local raw = {}
  if #names > 0 then
    local values = redis.call('MGET', unpack(names))
    for i = 1, n do if at[i] then raw[i] = values[at[i]] end end
  end
  return raw
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

/** Whole numbers in and out of the batch, as little-endian doubles, a few hundred per C call. */
const DOUBLES = `
local function unpackDoubles(s)
  local out, count, at = {}, #s / 8, 1
  while count > 0 do
    local take = math.min(count, 200)
    local chunk = {struct.unpack('<' .. string.rep('d', take), s, at)}
    for i = 1, take do out[#out + 1] = chunk[i] end
    at = chunk[take + 1]
    count = count - take
  end
  return out
end

local function packDoubles(values)
  local parts = {}
  for from = 1, #values, 200 do
    local to = math.min(#values, from + 199)
    parts[#parts + 1] = struct.pack('<' .. string.rep('d', to - from + 1), unpack(values, from, to))
  end
  return table.concat(parts)
end
`;

/**
 * The batch. KEYS: the keys of every operation, in order. ARGV[1]: the operations' numbers, as
 * doubles; ARGV[2...]: the lease ids of the A and R operations, in order. Each operation's numbers
 * are a code, how many of the keys are its own, then
 *   1 (A) leaseMs (period requestCap tokenCap)...  admission: check every rule; only if none is
 *                                                  breached, count the request in every window
 *                                                  and add the lease to every concurrency rule
 *   2 (T) tokens period...                         token charge (concurrency rules skipped)
 *   3 (R)                                          release: the lease leaves every key
 *   4 (Q) period...                                read, changing nothing
 * Answers the answers of A and Q, in order, as doubles.
 */
export const BATCH = `${WINDOW_FUNCTIONS}${KEEP_FOR}${DOUBLES}${CLOCK}
local out, o = {}, 0

-- Per rule of the admission being checked (flat arrays, reused: no table per rule).
local start, ws, rp, rc, tp, tc, rolled = {}, {}, {}, {}, {}, {}, {}

local function admit(first, n, v, at, lease)
  local leaseMs = v[at]
  local function periodOf(i) return v[at + 3 * i - 2] end
  local raw = windows(first, n, periodOf)
  local breached = false
  for i = 1, n do
    local key = KEYS[first + i]
    local c = at + 3 * i - 2
    local period, maxRequests, maxTokens = v[c], v[c + 1], v[c + 2]
    if period == 0 then
      -- Expired leases are not counted here; the renewal prunes them.
      local inFlight = redis.call('ZCOUNT', key, nowMs + 1, '+inf')
      if inFlight >= maxRequests then breached = true end
      rc[i] = inFlight
    else
      local s, w0, p0, c0, q0, d0, moved = roll(raw[i], period, now)
      local elapsed = now - s
      if maxRequests > 0 and carried(p0, period, elapsed) + c0 >= maxRequests then breached = true end
      if maxTokens > 0 and carried(q0, period, elapsed) + d0 >= maxTokens then breached = true end
      start[i], ws[i], rp[i], rc[i], tp[i], tc[i], rolled[i] = s, w0, p0, c0, q0, d0, moved
    end
  end
  out[o + 1], out[o + 2] = now, breached and 0 or 1
  o = o + 2
  for i = 1, n do
    local key, period = KEYS[first + i], periodOf(i)
    if period == 0 then
      local inFlight = rc[i]
      if not breached then
        redis.call('ZADD', key, nowMs + leaseMs, lease)
        keepFor(key, leaseMs)
        inFlight = inFlight + 1
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = 0, 0, 0, 0, 0, inFlight
    else
      if not breached then rc[i] = rc[i] + 1 end
      -- A roll is kept even on a refusal, as in memory: the counts stay those of the newest window.
      if not breached or rolled[i] then save(key, period, rolled[i], ws[i], rp[i], rc[i], tp[i], tc[i]) end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = start[i], rp[i], rc[i], tp[i], tc[i], 0
    end
    o = o + 6
  end
  return at + 1 + 3 * n
end

local function addTokens(first, n, v, at)
  local tokens = v[at]
  local function periodOf(i) return v[at + i] end
  local raw = windows(first, n, periodOf)
  for i = 1, n do
    local period = periodOf(i)
    if period > 0 then
      local _, w0, p0, c0, q0, d0, moved = roll(raw[i], period, now)
      save(KEYS[first + i], period, moved, w0, p0, c0, q0, d0 + tokens)
    end
  end
  return at + 1 + n
end

local function release(first, n, v, at, lease)
  for i = 1, n do redis.call('ZREM', KEYS[first + i], lease) end
  return at
end

local function read(first, n, v, at)
  local function periodOf(i) return v[at + i - 1] end
  local raw = windows(first, n, periodOf)
  out[o + 1], out[o + 2] = now, 0
  o = o + 2
  for i = 1, n do
    local period = periodOf(i)
    if period == 0 then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, 0, 0, 0, 0
      out[o + 6] = redis.call('ZCOUNT', KEYS[first + i], nowMs + 1, '+inf')
    else
      local s, _, p0, c0, q0, d0 = roll(raw[i], period, now)
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = s, p0, c0, q0, d0, 0
    end
    o = o + 6
  end
  return at + n
end

local operations = {admit, addTokens, release, read}
local v = unpackDoubles(ARGV[1])
local at, first, leases = 1, 0, 1
while at <= #v do
  local code, n = v[at], v[at + 1]
  local lease
  if code == 1 or code == 3 then
    leases = leases + 1
    lease = ARGV[leases]
  end
  at = operations[code](first, n, v, at + 2, lease)
  first = first + n
end
return packDoubles(out)
`;

/**
 * Lease renewal. KEYS[i] holds lease ARGV[i+1]; ARGV[1]: lease length in ms. Only leases still
 * present are extended (XX): a lease removed by a reset stays removed. Expired leases (of gateways
 * that died) are pruned on the way. Returns how many were found.
 */
export const RENEW = `${KEEP_FOR}${CLOCK}
local leaseMs = tonumber(ARGV[1])
local found = 0
for i = 1, #KEYS do
  -- The leases of gateways that stopped renewing go here (admissions only skip them).
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', nowMs)
  if redis.call('ZSCORE', KEYS[i], ARGV[i + 1]) then
    redis.call('ZADD', KEYS[i], 'XX', nowMs + leaseMs, ARGV[i + 1])
    keepFor(KEYS[i], leaseMs)
    found = found + 1
  end
end
return found
`;
