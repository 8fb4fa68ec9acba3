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
 * previous and current, and in flight (a concurrency rule) or tokens reserved (a windowed one). The gateway computes the sliding estimates, Retry-After and
 * headers from them with the same code as for the memory store; the script computes the
 * estimates only to check the caps.
 *
 * Learned provider capacity (src/ratelimit/learned.ts) is one small key per (provider, model): a
 * string of twelve little-endian doubles, -1 where a value is absent —
 *   saturated until (ms, 0: not), cause (0 none, 1 cooldown, 2 requests, 3 tokens),
 *   requests limit, remaining, reset at (ms), tokens limit, remaining, reset at (ms),
 *   cooldown until (ms), last refused at (ms), updated at (ms), expires at (ms)
 * — expiring (PXAT) at its last reset or cooldown end, and at least a linger after its last write.
 * A sorted set beside them (the index: member = key, score = expiry) lists them for reading.
 * An admission may carry its target's key as its last key: the key is judged in the same script,
 * before anything is counted, and a saturated target refuses the admission like a breached rule.
 * A write that leaves a target saturated, or ends its saturation, is published on the channel
 * `<index>:saturated` (the key, a newline, the ms it lasts from now or 0 when over, a newline, its
 * cause code): gateways judge an admission no rule governs from what they heard, without a round
 * trip (see saturations.ts).
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

/** Learned capacity records (see above): read, judged, merged and written as the memory store does (learned.ts). */
const LEARNED_FUNCTIONS = `
local function decodeLearned(raw)
  if type(raw) == 'string' and #raw == 96 then
    local r = {struct.unpack('<dddddddddddd', raw)}
    -- A record past its expiry is no record (Redis drops it lazily).
    if r[12] > nowMs then return r end
  end
  return nil
end

-- A reported dimension (remaining >= 0) replaces the stored one, keeping the stored limit when none
-- was reported; its reset is absolute from now on.
local function mergeDimension(limit0, remaining0, reset0, limit, remaining, resetIn)
  if remaining < 0 then return limit0, remaining0, reset0 end
  if limit < 0 then limit = limit0 end
  local reset = -1
  if resetIn >= 0 then reset = nowMs + resetIn end
  return limit, remaining, reset
end
`;

/**
 * The batch. KEYS: the keys of every operation, in order. ARGV[1]: the operations' numbers, as
 * doubles; ARGV[2...]: the lease ids of the A and R operations and the channel and message of the P
 * operations, in order. Each operation's numbers
 * are a code, how many of the keys are its own, then
 *   1 (A) leaseMs learned reserve m b cost (period requestCap tokenCap)... (cap spent)...
 *                            admission: check every rule and, when learned is 1, the learned
 *                            capacity in its last key; only if no rule is breached and the target
 *                            is not saturated, count the request in every window and add the lease
 *                            to every concurrency rule. With m > 0, the m keys after the rules'
 *                            are the reservation sets of the rules with a token cap, in order: such
 *                            a rule is breached when its tokens, those reserved and `reserve`
 *                            exceed the cap, and an admission adds its lease (ending in
 *                            `|reserve`) to each. With b > 0, the 2b keys after those are the
 *                            budgets' (each one's reservation set and settled spend, amounts in
 *                            millionths of a dollar), checked once the rules admit and before
 *                            anything is written: a budget is reached when the larger of the
 *                            spend its gateway knows (`spent`) and its settled spend is at its cap,
 *                            or that, what is reserved on it and `cost` exceed the cap. A reached
 *                            budget refuses the admission (its flag is minus its place); else
 *                            `cost` is reserved on every budget as the member `<lease id>|cost`
 *                            (the lease id being the lease up to its `|`)
 *   2 (T) tokens period...   token charge (concurrency rules skipped)
 *   3 (R)                    release: the lease leaves every key
 *   4 (Q) n period...        read, changing nothing; with more keys than the n rules', the
 *                            reservation set of every windowed rule follows, in order
 *   5 (L) reserve lingerMs requestsLimit requestsRemaining requestsResetIn tokensLimit tokensRemaining
 *         tokensResetIn cooldownIn throttled
 *                            learn: merge what answers taught into the learned record (first key),
 *                            listed in the index (second key); -1 for what they did not say, times
 *                            in ms from now
 *   6 (C)                    read learned records, changing nothing
 *   7 (B)                    read budget reservations: per key (a budget's reservation set), the
 *                            millionths of a dollar its unexpired members hold, changing nothing
 *   8 (S) cost (expireAt)... budget settlement: the lease leaves each reservation set, `cost` is
 *                            added to each settled spend (expiring at its period's end, seconds)
 *   9 (P)                    publish: the message ARGV[n+1] on the channel ARGV[n] (no keys)
 * Answers the answers of A, Q, C and B, in order, as doubles (B: one number per key): an
 * admission's flag is 1 when admitted, 0 when refused by a rule or the learned capacity, -i when
 * refused by its i-th budget; an admission with a learned key adds the verdict (saturated until or
 * 0, cause, the time in ms, then three zeros) after its rows; a read of learned records is the time
 * in ms, then twelve numbers per key (all -1 for a missing one).
 */
export const BATCH = `${WINDOW_FUNCTIONS}${KEEP_FOR}${DOUBLES}${CLOCK}${LEARNED_FUNCTIONS}
local out, o = {}, 0

-- The tokens reserved in a rule's reservation set: one member per admission, its lease id ending
-- in '|' and the tokens it reserved, scored by its lease's expiry; expired ones (of gateways that
-- died) are not counted, and the renewals prune them.
local function reservedIn(key)
  local sum = 0
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', key, nowMs + 1, '+inf')) do
    sum = sum + (tonumber(string.match(member, '|(%d+)$')) or 0)
  end
  return sum
end

-- The tokens reserved in a token rule's reservation set, as reservedIn counts them, summed from
-- its members once per batch (the batch runs at one nowMs) and then kept in step with what this
-- batch adds and removes: summing every member at each admission costs as many steps as there
-- are requests in flight, per rule, per admission.
local tokensReserved = {}

local function reservedTokensIn(key)
  local sum = tokensReserved[key]
  if sum == nil then
    sum = reservedIn(key)
    tokensReserved[key] = sum
  end
  return sum
end

-- The admission's lease joins a reservation set; a lease id already there (never, ids are unique)
-- would make the sum unknown again.
local function addReservation(key, lease, expiresMs)
  local added = redis.call('ZADD', key, expiresMs, lease)
  local sum = tokensReserved[key]
  if sum ~= nil then tokensReserved[key] = added == 1 and sum + (tonumber(string.match(lease, '|(%d+)$')) or 0) or nil end
end

-- A lease leaves a key; in a reservation set summed in this batch, its tokens leave the sum if
-- they were counted there (its lease unexpired).
local function removeLease(key, lease)
  local sum = tokensReserved[key]
  if sum ~= nil then
    local expiresMs = tonumber(redis.call('ZSCORE', key, lease))
    if expiresMs ~= nil and expiresMs > nowMs then tokensReserved[key] = sum - (tonumber(string.match(lease, '|(%d+)$')) or 0) end
  end
  redis.call('ZREM', key, lease)
end

-- Per rule of the admission being checked (flat arrays, reused: no table per rule).
local start, ws, rp, rc, tp, tc, rolled = {}, {}, {}, {}, {}, {}, {}

-- Rules reserving tokens: their reservation sets' keys, and what each holds now (flat, reused).
local reservedNow, reservationKey = {}, {}

-- Whether a budget has no room for cost: its spend (the larger of what its gateway knows and what
-- the gateways settled here) at its cap, or that, its reservations and cost above it.
local function budgetReached(set, settledKey, cap, spent, cost)
  local settled = tonumber(redis.call('GET', settledKey) or 0) or 0
  local s = math.max(spent, settled)
  return s >= cap or s + reservedIn(set) + cost > cap
end

local function admit(first, keys, v, at, lease)
  local leaseMs, learned, reserve, m, b, cost = v[at], v[at + 1], v[at + 2], v[at + 3], v[at + 4], v[at + 5]
  local n = keys - learned - m - 2 * b
  local function periodOf(i) return v[at + 3 * i + 3] end
  local raw = windows(first, n, periodOf)
  local r = 0
  local breached = false
  -- The target's learned capacity: a saturated target refuses before anything is counted.
  local untilMs, cause = 0, 0
  if learned == 1 then
    local record = decodeLearned(redis.call('GET', KEYS[first + keys]))
    if record and record[1] > nowMs and record[2] > 0 then
      untilMs, cause = record[1], record[2]
      breached = true
    end
  end
  for i = 1, n do
    local key = KEYS[first + i]
    local c = at + 3 * i + 3
    local period, maxRequests, maxTokens = v[c], v[c + 1], v[c + 2]
    reservationKey[i] = false
    reservedNow[i] = 0
    if period == 0 then
      -- Expired leases are not counted here; the renewal prunes them.
      local inFlight = redis.call('ZCOUNT', key, nowMs + 1, '+inf')
      if inFlight >= maxRequests then breached = true end
      rc[i] = inFlight
    else
      local s, w0, p0, c0, q0, d0, moved = roll(raw[i], period, now)
      local elapsed = now - s
      if maxRequests > 0 and carried(p0, period, elapsed) + c0 >= maxRequests then breached = true end
      if maxTokens > 0 and m > 0 then
        r = r + 1
        reservationKey[i] = KEYS[first + n + r]
        reservedNow[i] = reservedTokensIn(reservationKey[i])
        if carried(q0, period, elapsed) + d0 + reservedNow[i] + reserve > maxTokens then breached = true end
      elseif maxTokens > 0 and carried(q0, period, elapsed) + d0 >= maxTokens then breached = true end
      start[i], ws[i], rp[i], rc[i], tp[i], tc[i], rolled[i] = s, w0, p0, c0, q0, d0, moved
    end
  end
  -- The budgets once the rules admit, before anything is written: a reached one refuses like a rule.
  local flag = breached and 0 or 1
  local budgetKey, budgetAt = first + n + m, at + 6 + 3 * n
  if not breached then
    for i = 1, b do
      local k, c = budgetKey + 2 * i - 1, budgetAt + 2 * i - 2
      if budgetReached(KEYS[k], KEYS[k + 1], v[c], v[c + 1], cost) then
        breached = true
        flag = -i
        break
      end
    end
  end
  if not breached and cost > 0 then
    local member = string.match(lease, '^[^|]*') .. '|' .. string.format('%d', cost)
    for i = 1, b do
      local set = KEYS[budgetKey + 2 * i - 1]
      redis.call('ZADD', set, nowMs + leaseMs, member)
      keepFor(set, leaseMs)
    end
  end
  out[o + 1], out[o + 2] = now, flag
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
      local reserved = reservedNow[i]
      if reservationKey[i] and not breached then
        addReservation(reservationKey[i], lease, nowMs + leaseMs)
        keepFor(reservationKey[i], leaseMs)
        reserved = reserved + reserve
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = start[i], rp[i], rc[i], tp[i], tc[i], reserved
    end
    o = o + 6
  end
  if learned == 1 then
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = untilMs, cause, nowMs, 0, 0, 0
    o = o + 6
  end
  return at + 6 + 3 * n + 2 * b
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
  for i = 1, n do removeLease(KEYS[first + i], lease) end
  return at
end

local function read(first, keys, v, at)
  local n = v[at]
  local function periodOf(i) return v[at + i] end
  local raw = windows(first, n, periodOf)
  -- With more keys than rules, every windowed rule's reservation set follows the rules' keys.
  local r = 0
  out[o + 1], out[o + 2] = now, 0
  o = o + 2
  for i = 1, n do
    local period = periodOf(i)
    if period == 0 then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, 0, 0, 0, 0
      out[o + 6] = redis.call('ZCOUNT', KEYS[first + i], nowMs + 1, '+inf')
    else
      local s, _, p0, c0, q0, d0 = roll(raw[i], period, now)
      local reserved = 0
      if keys > n then
        r = r + 1
        reserved = reservedTokensIn(KEYS[first + n + r])
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = s, p0, c0, q0, d0, reserved
    end
    o = o + 6
  end
  return at + 1 + n
end

local function learn(first, n, v, at)
  local key, index = KEYS[first + 1], KEYS[first + 2]
  local reserve, linger = v[at], v[at + 1]
  local old = decodeLearned(redis.call('GET', key))
  local rl, rr, rs, tl, tr, ts, cooldown, throttledAt = -1, -1, -1, -1, -1, -1, -1, -1
  if old then rl, rr, rs, tl, tr, ts, cooldown, throttledAt = old[3], old[4], old[5], old[6], old[7], old[8], old[9], old[10] end
  rl, rr, rs = mergeDimension(rl, rr, rs, v[at + 2], v[at + 3], v[at + 4])
  tl, tr, ts = mergeDimension(tl, tr, ts, v[at + 5], v[at + 6], v[at + 7])
  -- A cooldown only ever lengthens.
  if v[at + 8] >= 0 then cooldown = math.max(cooldown, nowMs + v[at + 8]) end
  if v[at + 9] == 1 then throttledAt = nowMs end
  -- Saturated until the latest of: a running cooldown, a dimension at or below the reserve before
  -- its reset (on a tie, the earlier cause in that order).
  local untilMs, cause = 0, 0
  if cooldown > nowMs then untilMs, cause = cooldown, 1 end
  if rr >= 0 and rs >= 0 and rr <= reserve and rs > nowMs and rs > untilMs then untilMs, cause = rs, 2 end
  if tr >= 0 and ts >= 0 and tr <= reserve and ts > nowMs and ts > untilMs then untilMs, cause = ts, 3 end
  local expires = math.max(nowMs + linger, untilMs, rs, ts, cooldown)
  redis.call('SET', key, struct.pack('<dddddddddddd', untilMs, cause, rl, rr, rs, tl, tr, ts, cooldown, throttledAt, nowMs, expires), 'PXAT', expires)
  redis.call('ZADD', index, expires, key)
  redis.call('ZREMRANGEBYSCORE', index, '-inf', nowMs)
  if redis.call('PTTL', index) < expires - nowMs then redis.call('PEXPIREAT', index, expires) end
  if cause > 0 then
    redis.call('PUBLISH', index .. ':saturated', key .. '\\n' .. string.format('%d', math.ceil(untilMs - nowMs)) .. '\\n' .. cause)
  elseif old and old[1] > nowMs and old[2] > 0 then
    redis.call('PUBLISH', index .. ':saturated', key .. '\\n0\\n0')
  end
  return at + 10
end

local function readLearned(first, n, v, at)
  out[o + 1] = nowMs
  o = o + 1
  for i = 1, n do
    local record = decodeLearned(redis.call('GET', KEYS[first + i]))
    for f = 1, 12 do out[o + f] = record and record[f] or -1 end
    o = o + 12
  end
  return at
end

-- What every gateway holds reserved on each budget (budgets.reservations), in millionths of a dollar.
local function readBudgets(first, n, v, at)
  for i = 1, n do out[o + i] = reservedIn(KEYS[first + i]) end
  o = o + n
  return at
end

-- The request ended: its reservation leaves every budget, and what it cost is added to each
-- budget's settled spend, which expires at the end of the budget's period.
local function settleBudgets(first, keys, v, at, lease)
  local cost = v[at]
  local n = keys / 2
  for i = 1, n do
    redis.call('ZREM', KEYS[first + 2 * i - 1], lease)
    if cost > 0 then
      redis.call('INCRBY', KEYS[first + 2 * i], cost)
      redis.call('EXPIREAT', KEYS[first + 2 * i], v[at + i])
    end
  end
  return at + 1 + n
end

local operations = {admit, addTokens, release, read, learn, readLearned, readBudgets, settleBudgets}
local v = unpackDoubles(ARGV[1])
local at, first, leases = 1, 0, 1
while at <= #v do
  local code, n = v[at], v[at + 1]
  if code == 9 then
    redis.call('PUBLISH', ARGV[leases + 1], ARGV[leases + 2])
    leases = leases + 2
    at = at + 2
  else
    local lease
    if code == 1 or code == 3 or code == 8 then
      leases = leases + 1
      lease = ARGV[leases]
    end
    at = operations[code](first, n, v, at + 2, lease)
    first = first + n
  end
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
