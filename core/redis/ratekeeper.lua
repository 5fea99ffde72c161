-- ratekeeper: one atomic decision for every limit of a request, on Redis.
-- Protocol version 1; see PROTOCOL.md beside this file. Decides exactly as the
-- ratekeeper core does, in integer microseconds held in Lua doubles: every
-- value stays below 2^53 under the limits the clients check (PROTOCOL.md).

local floor = math.floor
local fmt = function(x) return string.format('%.0f', x) end

local function max(a, b) if a > b then return a end return b end
local function min(a, b) if a < b then return a end return b end
-- ceil(a / b) for integers 0 <= a < 2^53, b >= 1.
local function ceil_div(a, b)
  local q = floor(a / b)
  if q * b < a then q = q + 1 end
  return q
end
local function since(now, at) return max(at - now, 0) end
-- Every number this script writes is below 2^53 (PROTOCOL.md): one at or
-- above it was written by something else, and is not even exact here.
local EXACT = 2 ^ 53

-- Raised where a key holds what this script never writes, from wherever it
-- is read: a `ratekeeper:` error, which the clients raise as the script's
-- own. Decided on, a number past 2^53 made a TTL Redis refused ("value is
-- not an integer"), which the clients took for Redis out of reach (and
-- on_error answered), or a reply past 2^63, which came out negative.
local limit_of_key = {}
local function refuse(key, value)
  error({ err = 'ratekeeper: the key of limit ' .. limit_of_key[key] .. " holds a value this script did not write: '" .. string.sub(value, 1, 64) .. "'" })
end

-- Whether no field is negative: only a token bucket's bands are written
-- negative (a debt), so a negative elsewhere is another algorithm's state
-- (a bucket's of the same shape) or nothing of this one's, and the key
-- starts fresh. Decided on, a negative use or count left room without end.
local function naturals(f)
  for _, x in ipairs(f) do
    if x < 0 then return false end
  end
  return true
end

-- Each algorithm: config(args), fresh(cfg), load(fields) and dump(state) for
-- the stored string, which the key's birth follows (or read(key) -> state,
-- birth and write(key, state, birth) for another type of key; see born);
-- decide(cfg, st, now, cost) -> allowed, remaining, retry_after,
-- reset_after, and the state after it (st is not changed);
-- book(cfg, state, slot, cost) -> the state with `cost` booked at the
-- instant `slot` (or the latest time seen, if later), which is not before
-- the limit's own earliest slot (state: decide's for a cost of 0), or nil
-- when it cannot be booked (the core's Limiter::reserve_after);
-- refund(cfg, st, now, taken_at, cost) -> new state.
--
-- A bucket (GCRA, token bucket) books in a line: its state holds where the
-- line ends, not single bookings, and a refund moves that end back wherever
-- the booking stands in it. Given back from the middle of the line, a
-- booking's units went to the next caller at the slot of the one behind it:
-- two at once from a burst of one. So a bucket has mark(cfg, state):
-- integers that `reserve` and `acquire` reply with as their call wrote
-- them, and that a guarded `refund` compares with the key's (PROTOCOL.md,
-- "Guarded refund"): it gives back only while the key's mark is still the
-- call's, which holds only while nothing taken after it is outstanding.
local algorithms = {}

-- Gcra: the part of the tolerance in use, relative to the latest time seen.
algorithms.gcra = {
  config = function(a) return { burst = a[1], interval = a[2], tolerance = a[1] * a[2] } end,
  fresh = function(c) return { latest = 0, used = 0 } end,
  load = function(f)
    if #f ~= 2 or not naturals(f) then return nil end
    return { latest = f[1], used = f[2] }
  end,
  dump = function(s) return fmt(s.latest) .. ' ' .. fmt(s.used) end,
  decide = function(c, s, now, cost)
    local used, at, lag
    if now >= s.latest then
      used, at, lag = max(s.used - (now - s.latest), 0), now, 0
    else
      used, at, lag = s.used, s.latest, s.latest - now
    end
    local need = cost * c.interval
    local slack = c.tolerance - need
    local allowed = cost == 0 or used <= slack
    if allowed then used = used + need end
    local room = max(c.tolerance - used, 0)
    local remaining = 0
    if room >= c.interval then remaining = floor(room / c.interval) end
    local retry, reset = 0, 0
    if not allowed then retry = used - slack + lag end
    if used ~= 0 then reset = used + lag end
    return allowed, remaining, retry, reset, { latest = at, used = used }
  end,
  book = function(c, s, slot, cost)
    -- The TAT moves to max(TAT, slot) + cost * T.
    return { latest = s.latest, used = max(s.used, slot - s.latest) + cost * c.interval }
  end,
  refund = function(c, s, now, taken_at, cost)
    return { latest = s.latest, used = max(s.used - cost * c.interval, 0) }
  end,
  -- The theoretical arrival time, the line's end: a booking or an admission
  -- moves it later by its cost at least (a later time seen moves it to that
  -- time, never back), a guarded refund moves it back no earlier than it was
  -- before the booking it gives back. Equal to a booking's own, nothing
  -- taken since is outstanding (PROTOCOL.md). The latest time seen is left
  -- out: with the server's clock every call has its own, and a waiter given
  -- back behind this one would leave it the latest with another time.
  mark = function(c, s) return { s.latest + s.used } end,
}

local function gcd(a, b)
  while b ~= 0 do a, b = b, a % b end
  return a
end

-- One band of a token bucket: tokens, tokens owed to bookings (only when
-- tokens is 0), and the fraction of the next token in units of 1/p.
local function band_add(r, b, n)
  local paid = min(n, b.owed)
  b.owed = b.owed - paid
  if n - paid >= r.cap - b.tokens then
    b.tokens, b.carry = r.cap, 0
  else
    b.tokens = b.tokens + n - paid
  end
end

local function band_advanced(r, b, elapsed)
  local out = { tokens = b.tokens, owed = b.owed, carry = b.carry }
  if b.tokens == r.cap or elapsed == 0 then return out end
  -- Full once k * elapsed reaches what the band lacks; below that, every
  -- product stays under (owed + room) * p.
  if elapsed >= ceil_div((b.owed + r.cap - b.tokens) * r.p - b.carry, r.k) then
    return { tokens = r.cap, owed = 0, carry = 0 }
  end
  local scaled = b.carry + r.k * elapsed
  local steps = floor(scaled / r.p)
  out.carry = scaled - steps * r.p
  band_add(r, out, steps)
  return out
end

local function band_wait(r, b, target)
  local missing = target + b.owed - b.tokens
  if missing <= 0 then return 0 end
  return ceil_div(missing * r.p - b.carry, r.k)
end

-- The band as of now such that `wait` later it is what it would be had
-- `cost` been taken at that slot (the core's Band::booked).
local function band_booked(r, b, wait, cost)
  local at_slot = band_advanced(r, b, wait)
  local scaled = (at_slot.tokens - at_slot.owed - cost) * r.p + at_slot.carry - r.k * wait
  local whole = floor(scaled / r.p)
  local out = { tokens = 0, owed = 0, carry = scaled - whole * r.p }
  if whole >= 0 then out.tokens = whole else out.owed = -whole end
  return out
end

-- TokenBucket with greedy bandwidths starting full. Stored per band as
-- `tokens - owed` and the carry.
algorithms.token_bucket = {
  config = function(a)
    local bands, limit = {}, nil
    for i = 2, 1 + 3 * a[1], 3 do
      local cap, tokens, period = a[i], a[i + 1], a[i + 2]
      local g = gcd(tokens, period)
      bands[#bands + 1] = { cap = cap, k = tokens / g, p = period / g }
      if limit == nil or cap < limit then limit = cap end
    end
    return { bands = bands, limit = limit }
  end,
  fresh = function(c)
    local s = { updated = nil }
    for i, b in ipairs(c.bands) do s[i] = { tokens = b.cap, owed = 0, carry = 0 } end
    return s
  end,
  -- A named limit keeps its key when its configuration changes: bands
  -- carry over by position, as a reconfigure carries them (a new band
  -- starts full, one no longer configured is dropped, and tokens at or
  -- above its capacity make a full band).
  load = function(f, c)
    if #f % 2 ~= 1 or f[1] < 0 then return nil end
    local s = { updated = f[1] }
    for i, b in ipairs(c.bands) do
      local at = 2 * i
      if f[at] == nil or f[at] >= b.cap then
        s[i] = { tokens = b.cap, owed = 0, carry = 0 }
      else
        -- A carry of another period restarts (a partial token, as a reconfigure has it).
        local carry = (f[at + 1] >= 0 and f[at + 1] < b.p) and f[at + 1] or 0
        s[i] = { tokens = max(f[at], 0), owed = max(-f[at], 0), carry = carry }
      end
    end
    return s
  end,
  dump = function(s)
    local out = { fmt(s.updated) }
    for _, b in ipairs(s) do out[#out + 1] = fmt(b.tokens - b.owed) .. ' ' .. fmt(b.carry) end
    return table.concat(out, ' ')
  end,
  decide = function(c, s, now, cost)
    local at, lag, elapsed, bands = now, 0, 0, {}
    if s.updated ~= nil and now <= s.updated then
      at, lag = s.updated, s.updated - now
    elseif s.updated ~= nil then
      elapsed = now - s.updated
    end
    local allowed = true
    for i, b in ipairs(s) do
      bands[i] = band_advanced(c.bands[i], b, elapsed)
      if cost ~= 0 and (bands[i].owed ~= 0 or bands[i].tokens < cost) then allowed = false end
    end
    if allowed then
      for _, b in ipairs(bands) do b.tokens = b.tokens - min(cost, b.tokens) end
    end
    local remaining, retry, reset = nil, 0, 0
    for i, b in ipairs(bands) do
      if remaining == nil or b.tokens < remaining then remaining = b.tokens end
      if not allowed then retry = max(retry, band_wait(c.bands[i], b, cost)) end
      reset = max(reset, band_wait(c.bands[i], b, c.bands[i].cap))
    end
    if retry > 0 then retry = retry + lag end
    if reset > 0 then reset = reset + lag end
    bands.updated = at
    return allowed, remaining, retry, reset, bands
  end,
  book = function(c, s, slot, cost)
    local wait = max(slot - s.updated, 0)
    local out = { updated = s.updated }
    for i, b in ipairs(s) do
      local r = c.bands[i]
      out[i] = band_booked(r, b, wait, cost)
      -- Refused where the debt would take the arithmetic past 2^52.
      if (out[i].owed + r.cap) * r.p > 2 ^ 52 then return nil end
    end
    return out
  end,
  refund = function(c, s, now, taken_at, cost)
    local out = { updated = s.updated }
    for i, b in ipairs(s) do
      out[i] = { tokens = b.tokens, owed = b.owed, carry = b.carry }
      band_add(c.bands[i], out[i], cost)
    end
    return out
  end,
  -- Per band, the instant it is full again, its line's end as a GCRA's TAT
  -- is: time refills the band without moving it (until full, where it is
  -- the latest time seen), a booking or an admission moves it later by
  -- its cost's refill time at least, a guarded refund back no earlier than
  -- it was before the booking it gives back (PROTOCOL.md). In whole µs and
  -- the remainder in units of 1/k µs, exact where their product may not
  -- be. (The state as stored was the mark before: any call at a later time
  -- changed it, and a booking given back after a later one, given back
  -- first, gave nothing back on a token bucket where it did on a GCRA.)
  mark = function(c, s)
    local out = {}
    for i, b in ipairs(s) do
      local r = c.bands[i]
      -- What the band lacks to be full, in units of 1/k µs (0 when full).
      local lack = max((r.cap - b.tokens + b.owed) * r.p - b.carry, 0)
      local whole = floor(lack / r.k)
      local rest = lack - whole * r.k
      if rest < 0 then
        whole, rest = whole - 1, rest + r.k
      elseif rest >= r.k then
        whole, rest = whole + 1, rest - r.k
      end
      out[#out + 1] = s.updated + whole
      out[#out + 1] = rest
    end
    return out
  end,
}

-- FixedWindow over windows [k * window, (k + 1) * window) of the wire time;
-- `floor` is the slot of the latest booking, before which nothing is admitted.
algorithms.fixed_window = {
  config = function(a) return { limit = a[1], window = a[2] } end,
  fresh = function(c) return { latest = 0, index = 0, used = 0, floor = 0 } end,
  load = function(f)
    -- (States written before the floor lack it.)
    if (#f ~= 3 and #f ~= 4) or not naturals(f) then return nil end
    return { latest = f[1], index = f[2], used = f[3], floor = f[4] or 0 }
  end,
  dump = function(s)
    return fmt(s.latest) .. ' ' .. fmt(s.index) .. ' ' .. fmt(s.used) .. ' ' .. fmt(s.floor)
  end,
  decide = function(c, s, now, cost)
    local latest = max(s.latest, now)
    local at = max(latest, s.floor)
    local index = floor(at / c.window)
    local used = 0
    if index == s.index then used = s.used end
    local open = latest >= s.floor
    local pending = 0
    if not open then pending = s.floor end
    local ends = (index + 1) * c.window
    local fits = cost <= c.limit - used
    local fits_at = ends
    if fits then fits_at = at end
    local allowed = cost == 0 or (open and fits)
    if allowed then used = used + cost end
    local remaining, retry, reset = 0, 0, since(now, pending)
    -- (A count kept under a name whose limit was lowered since may be above it.)
    if open then remaining = max(c.limit - used, 0) end
    if not allowed then retry = since(now, fits_at) end
    if used > 0 then reset = since(now, max(ends, pending)) end
    return allowed, remaining, retry, reset,
      { latest = latest, index = index, used = used, floor = s.floor }
  end,
  book = function(c, s, slot, cost)
    slot = max(s.latest, slot)
    local index = floor(slot / c.window)
    local used = cost
    if index == s.index then used = used + s.used end
    return { latest = s.latest, index = index, used = used, floor = slot }
  end,
  refund = function(c, s, now, taken_at, cost)
    local used = s.used
    if floor(taken_at / c.window) == s.index then used = used - min(cost, used) end
    return { latest = s.latest, index = s.index, used = used, floor = s.floor }
  end,
}

-- SlidingWindowCounter: the previous window's count weighted by its overlap.
local function first_in(c, k, prev, room)
  local left = c.window
  if prev ~= 0 then left = min(floor(room * c.window / prev), c.window) end
  return max((k + 1) * c.window - left, 0)
end

-- The counts as of `at`, from a state whose counts are those of window s.index.
local function swc_counts(c, s, at)
  local index = floor(at / c.window)
  if index == s.index then return index, s.cur, s.prev end
  if index == s.index + 1 then return index, 0, s.cur end
  return index, 0, 0
end

algorithms.sliding_window_counter = {
  config = function(a) return { limit = a[1], window = a[2] } end,
  fresh = function(c) return { latest = 0, index = 0, cur = 0, prev = 0, floor = 0 } end,
  load = function(f)
    -- (States written before the floor lack it.)
    if (#f ~= 4 and #f ~= 5) or not naturals(f) then return nil end
    return { latest = f[1], index = f[2], cur = f[3], prev = f[4], floor = f[5] or 0 }
  end,
  dump = function(s)
    return fmt(s.latest) .. ' ' .. fmt(s.index) .. ' ' .. fmt(s.cur) .. ' ' .. fmt(s.prev) .. ' ' .. fmt(s.floor)
  end,
  decide = function(c, s, now, cost)
    local latest = max(s.latest, now)
    local at = max(latest, s.floor)
    local index, cur, prev = swc_counts(c, s, at)
    local open = latest >= s.floor
    local pending = 0
    if not open then pending = s.floor end
    local fits_at
    if cost <= c.limit - cur then
      fits_at = max(first_in(c, index, prev, c.limit - cur - cost), at)
    else
      fits_at = first_in(c, index + 1, cur, c.limit - cost)
    end
    local allowed = cost == 0 or (open and fits_at == at)
    if allowed then cur = cur + cost end
    local remaining = 0
    if open then
      local weighted = ceil_div(prev * ((index + 1) * c.window - at), c.window)
      remaining = max(c.limit - cur - weighted, 0)
    end
    local fresh_at = 0
    if cur ~= 0 then fresh_at = (index + 2) * c.window
    elseif prev ~= 0 then fresh_at = (index + 1) * c.window end
    local retry = 0
    if not allowed then retry = since(now, fits_at) end
    return allowed, remaining, retry, since(now, max(fresh_at, pending)),
      { latest = latest, index = index, cur = cur, prev = prev, floor = s.floor }
  end,
  book = function(c, s, slot, cost)
    slot = max(s.latest, slot)
    local index, cur, prev = swc_counts(c, s, slot)
    return { latest = s.latest, index = index, cur = cur + cost, prev = prev, floor = slot }
  end,
  refund = function(c, s, now, taken_at, cost)
    local out = { latest = s.latest, index = s.index, cur = s.cur, prev = s.prev, floor = s.floor }
    local back = s.index - floor(taken_at / c.window)
    if back == 0 then out.cur = out.cur - min(cost, out.cur)
    elseif back == 1 then out.prev = out.prev - min(cost, out.prev) end
    return out
  end,
}

-- SlidingWindowLog: the admitted (and booked) events, oldest first, one entry
-- per instant (events of one instant add up, never collapse). Kept in a
-- sorted set: member "at:cost" scored by its instant (one member per
-- instant, so members are unique), "latest:t", the latest time seen,
-- scored -2 - used, where `used` is the sum of every entry's cost (score -1,
-- as scripts before kept it: no sum, counted once on reading), and
-- "birth:b", the key's birth, scored -1: above "latest:t", which earlier
-- scripts read as the lowest member below 0, and outside the ranges of
-- entries they read (from above -1), so that they read the key as before
-- (and drop the birth when they write it).
--
-- A call reads only what it needs: the entries that left the window since
-- the key was written, the newest entry, and, for a denial, the oldest ones
-- until the cost would fit; it writes only what changed. So its time does
-- not grow with `limit`, where reading and rewriting the whole set took 12
-- ms at a limit of 10,000. The state is a view of the key: the stored
-- entries after `cut` (entries at or before it are gone), with the costs in
-- `over` in place of the stored ones (0: removed), then `tail`, entries
-- added since (never before a stored entry still in the view). `key` is
-- false for a key that held nothing.
local function log_entry(key, member)
  local at, cost = string.match(member, '^(%d+):(%d+)$')
  at, cost = tonumber(at), tonumber(cost)
  if not at or at >= EXACT or cost >= EXACT then refuse(key, member) end
  return at, cost
end

local function log_copy(s)
  local v = { key = s.key, latest = s.latest, used = s.used, cut = s.cut, over = {}, tail = {}, emptied = s.emptied }
  for at, cost in pairs(s.over) do
    if at > s.cut then v.over[at] = cost end
  end
  for i, e in ipairs(s.tail) do v.tail[i] = { at = e.at, cost = e.cost } end
  return v
end

-- The stored entries of the view with scores in `lo`..`hi` (Redis range
-- syntax), in order (`rev`: newest first), `count` at a time: calls
-- visit(at, cost) for each until it returns true; true if one did. Each page
-- starts past the last entry read (one entry per instant, so its score
-- bounds the next page), not at an offset, which Redis would walk past again
-- on every page: a walk of k entries took O(k^2 / count), seconds at 10^5.
local function log_stored(s, lo, hi, count, visit, rev)
  if not s.key then return false end
  while true do
    local got
    if rev then
      got = redis.call('ZREVRANGEBYSCORE', s.key, hi, lo, 'LIMIT', 0, count)
    else
      got = redis.call('ZRANGEBYSCORE', s.key, lo, hi, 'LIMIT', 0, count)
    end
    local at, cost
    for _, member in ipairs(got) do
      at, cost = log_entry(s.key, member)
      local now_cost = s.over[at]
      if now_cost == nil then now_cost = cost end
      if now_cost > 0 and visit(at, now_cost) then return true end
    end
    if #got < count then return false end
    if rev then hi = '(' .. fmt(at) else lo = '(' .. fmt(at) end
  end
end

-- The newest entry of the view: its instant and cost, or nil.
local function log_newest(s)
  local t = s.tail[#s.tail]
  if t ~= nil then return t.at, t.cost end
  local at, cost
  log_stored(s, '(' .. fmt(s.cut), '+inf', 4, function(a, c)
    at, cost = a, c
    return true
  end, true)
  return at, cost
end

-- How many entries the view holds.
local function log_count(s)
  local n = #s.tail
  if s.key then
    n = n + redis.call('ZCOUNT', s.key, '(' .. fmt(s.cut), '+inf')
    for at, cost in pairs(s.over) do
      if at > s.cut and cost == 0 then n = n - 1 end
    end
  end
  return n
end

-- Adds `cost` at `at`, not before the newest entry (`newest`, its cost `newest_cost`).
local function log_push(v, at, cost, newest, newest_cost)
  v.used = v.used + cost
  local t = v.tail[#v.tail]
  if newest == at then
    if t ~= nil then t.cost = t.cost + cost else v.over[at] = newest_cost + cost end
  else
    v.tail[#v.tail + 1] = { at = at, cost = cost }
  end
end

algorithms.sliding_window_log = {
  config = function(a) return { limit = a[1], window = a[2] } end,
  fresh = function(c) return { key = false, latest = 0, used = 0, cut = -1, over = {}, tail = {} } end,
  read = function(key)
    local special = redis.call('ZRANGEBYSCORE', key, '-inf', '(0', 'WITHSCORES')
    if #special == 0 then return nil end
    -- The latest time (the lowest score), then the birth, if any.
    local score = tonumber(special[2])
    local latest = tonumber(string.match(special[1], '^latest:(%d+)$'))
    if not latest or latest >= EXACT or -2 - score >= EXACT then
      refuse(key, special[1] .. ' ' .. special[2])
    end
    local birth = nil
    if special[3] ~= nil then
      birth = tonumber(string.match(special[3], '^birth:(%d+)$'))
      if not birth or birth >= EXACT or special[5] ~= nil then
        refuse(key, special[3] .. ' ' .. special[4])
      end
    end
    local s = { key = key, latest = latest, used = 0, cut = -1, over = {}, tail = {} }
    if score <= -2 then
      s.used = -2 - score
    else
      log_stored(s, 0, '+inf', 1000, function(_, cost) s.used = s.used + cost end)
    end
    return s, birth
  end,
  write = function(key, s, birth)
    -- UNLINK frees a large set outside the script's time (Redis frees it
    -- in the background), where removing 10^6 entries took half a second.
    if s.emptied then
      redis.call('UNLINK', key)
    elseif s.cut >= 0 then
      redis.call('ZREMRANGEBYSCORE', key, 0, fmt(s.cut))
    end
    for at, cost in pairs(s.over) do
      if at > s.cut then
        redis.call('ZREMRANGEBYSCORE', key, fmt(at), fmt(at))
        if cost > 0 then redis.call('ZADD', key, fmt(at), fmt(at) .. ':' .. fmt(cost)) end
      end
    end
    local args = {}
    for i, e in ipairs(s.tail) do
      if e.at > s.cut then
        args[#args + 1] = fmt(e.at)
        args[#args + 1] = fmt(e.at) .. ':' .. fmt(e.cost)
      end
      -- In chunks: unpack() is bounded by Lua's C stack.
      if #args >= 1000 or (i == #s.tail and #args > 0) then
        redis.call('ZADD', key, unpack(args))
        args = {}
      end
    end
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(0')
    if birth == nil then
      redis.call('ZADD', key, fmt(-2 - s.used), 'latest:' .. fmt(s.latest))
    else
      redis.call('ZADD', key, fmt(-2 - s.used), 'latest:' .. fmt(s.latest), -1, 'birth:' .. fmt(birth))
    end
  end,
  decide = function(c, s, now, cost)
    local latest = max(s.latest, now)
    local v = log_copy(s)
    v.latest = latest
    -- Entries at or before `edge` have left the window (an event leaves it
    -- exactly `window` after it happened).
    local edge = latest - c.window
    -- The newest entry stays the newest when older ones leave.
    local newest, newest_cost = log_newest(v)
    if edge > v.cut then
      if newest == nil or newest <= edge then
        -- Every entry left (a key back after a long pause): no need to
        -- read them to know their sum, nor to remove them one by one.
        v.tail, v.cut, v.used, v.emptied = {}, edge, 0, true
        newest, newest_cost = nil, nil
      else
        local gone = 0
        log_stored(v, '(' .. fmt(v.cut), fmt(edge), 1000, function(_, c2) gone = gone + c2 end)
        local kept = {}
        for _, e in ipairs(v.tail) do
          if e.at > edge then kept[#kept + 1] = e else gone = gone + e.cost end
        end
        v.tail, v.cut, v.used = kept, edge, v.used - gone
      end
    end
    local used = v.used
    -- The earliest instant cost fits, not before the newest entry (bookings
    -- are served in order): walk the oldest entries out.
    local fits_at, in_window = max(latest, newest or 0), used
    if in_window + cost > c.limit then
      local function out(at, c2)
        in_window = in_window - c2
        fits_at = max(fits_at, at + c.window)
        return in_window + cost <= c.limit
      end
      if not log_stored(v, '(' .. fmt(v.cut), '+inf', 16, out) then
        for _, e in ipairs(v.tail) do
          if out(e.at, e.cost) then break end
        end
      end
    end
    local allowed = cost == 0 or fits_at == latest
    local consumed = 0
    if allowed then consumed = cost end
    local retry, reset = 0, 0
    if not allowed then retry = since(now, fits_at) end
    if consumed > 0 then reset = since(now, latest + c.window)
    elseif newest ~= nil then reset = since(now, newest + c.window) end
    -- Until a booking's slot nothing is admitted, whatever room is left.
    local remaining = 0
    if newest == nil or newest <= latest then remaining = max(c.limit - used - consumed, 0) end
    if consumed > 0 then log_push(v, latest, consumed, newest, newest_cost) end
    return allowed, remaining, retry, reset, v
  end,
  book = function(c, s, slot, cost)
    slot = max(s.latest, slot)
    -- As the core's ring: at most 2 * limit instants.
    local newest, newest_cost = log_newest(s)
    if newest ~= slot and log_count(s) >= 2 * c.limit then return nil end
    local v = log_copy(s)
    log_push(v, slot, cost, newest, newest_cost)
    return v
  end,
  refund = function(c, s, now, taken_at, cost)
    local v = log_copy(s)
    for i = #v.tail, 1, -1 do
      local e = v.tail[i]
      if e.at == taken_at then
        local back = min(cost, e.cost)
        e.cost, v.used = e.cost - back, v.used - back
        if e.cost == 0 then table.remove(v.tail, i) end
        return v
      end
    end
    if taken_at > v.cut then
      log_stored(v, fmt(taken_at), fmt(taken_at), 1, function(at, held)
        local back = min(cost, held)
        v.over[at], v.used = held - back, v.used - back
        return true
      end)
    end
    return v
  end,
}

local fields = { gcra = 2, fixed_window = 2, sliding_window_counter = 2, sliding_window_log = 2 }

-- Arguments.
if ARGV[1] ~= '1' then
  return redis.error_reply('ratekeeper: protocol version ' .. tostring(ARGV[1]) .. ' is not 1')
end
local mode = ARGV[2]
local now
local caller_time = ARGV[3] ~= ''
if not caller_time then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[3])
end
local n = tonumber(ARGV[4])
if n == nil or n < 1 or n ~= #KEYS then
  return redis.error_reply('ratekeeper: ' .. #KEYS .. ' keys for ' .. tostring(n) .. ' limits')
end
-- Each limit reads its key before any writes: two limits on one key would
-- each decide on the same state, and the last write would win.
for i = 2, n do
  for j = 1, i - 1 do
    if KEYS[i] == KEYS[j] then
      return redis.error_reply('ratekeeper: limits ' .. j .. ' and ' .. i .. ' name the same key')
    end
  end
end
local pos = 5
local limits = {}
for i = 1, n do limit_of_key[KEYS[i]] = i end
for i = 1, n do
  local name = ARGV[pos]
  local algorithm = algorithms[name]
  if algorithm == nil then
    return redis.error_reply('ratekeeper: unknown algorithm ' .. tostring(name))
  end
  local count = fields[name]
  if count == nil then count = 1 + 3 * tonumber(ARGV[pos + 1]) end
  local args = {}
  for j = 1, count do args[j] = tonumber(ARGV[pos + j]) end
  pos = pos + count + 1
  local cfg = algorithm.config(args)
  local state, birth
  if algorithm.read then
    state, birth = algorithm.read(KEYS[i])
  else
    local stored = redis.call('GET', KEYS[i])
    if stored then
      -- Integers only, as this script writes them: anything else was not
      -- written by it, and is refused rather than decided on.
      local f = {}
      for word in string.gmatch(stored, '%S+') do
        local x = string.match(word, '^%-?%d+$') and tonumber(word)
        if not x or x >= EXACT or x <= -EXACT then refuse(KEYS[i], stored) end
        f[#f + 1] = x
      end
      -- The key's birth (see born), written last and negative: no state
      -- ends in a negative number (nor did any an earlier script wrote,
      -- which kept no birth), so that the states' shapes are those they
      -- had without it.
      if f[#f] ~= nil and f[#f] < 0 then birth = -table.remove(f) end
      -- A state of another shape (the limit's algorithm changed under the
      -- same name) is none: the key starts fresh.
      state = algorithm.load(f, cfg)
    end
  end
  local loaded = state ~= nil
  if not loaded then state, birth = algorithm.fresh(cfg), nil end
  limits[i] = { algorithm = algorithm, cfg = cfg, state = state, loaded = loaded, dirty = false, birth = birth }
end

-- A key's birth: the server's TIME, in µs, of the call that wrote its state
-- first (the key held none, one of another shape, or one an earlier script
-- wrote, which kept none). Every later write keeps it, until the key is gone
-- (a reset's UNLINK, an expiry, this script's UNLINK of a fresh state): the
-- next call to write it gives it a later TIME. A booking's reply sends it
-- with the marks, and a give-back sent with it gives back only to the state
-- it booked in (PROTOCOL.md, "Guarded refund"), where a reset elsewhere
-- started another, which may have taken the same units anew. On the
-- callers' clock, where a deployment forbids TIME in scripts (an ACL user
-- without it: the callers' clock is there for them), the caller's nonce
-- (a random integer in [1, 2^53), sent after the mode's arguments), so
-- that a key reset and written again at the very instant of the callers'
-- clock that wrote it first is told apart (but for a chance in 2^52);
-- a client that sends none gets the caller's `now` plus 1 (never 0, which
-- a reply sends for no birth), which tells only lives first written at
-- different instants apart. (redis.call raised, and every first write of a
-- key failed.)
local server_time = nil
local nonce = nil
local function born()
  if not caller_time then return now end
  if server_time == nil then
    local t = redis.pcall('TIME')
    if t.err then
      server_time = nonce or now + 1
    else
      server_time = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
  end
  return server_time
end

-- A string key's value: the state, then its birth, negative (none for a
-- state an earlier script wrote that a refund gives back to: it keeps its form).
local function stored(l)
  local text = l.algorithm.dump(l.state)
  if l.birth ~= nil then text = text .. ' ' .. fmt(-l.birth) end
  return text
end
local m = tonumber(ARGV[pos])
local costs = {}
for j = 1, m do costs[j] = tonumber(ARGV[pos + j]) end
pos = pos + m + 1

-- Stores every changed state to expire when it is back to fresh, or deletes
-- it when it is fresh already. On the server's clock, at the decision's
-- time plus `reset` (PXAT, in ms rounded up). On the callers' clock, which
-- may count from any origin, `reset` after the decision on the server's
-- clock (PX), and no earlier than the decision's time plus `reset` read as
-- Unix time (PEXPIREAT ... GT, which only ever lengthens): exact for a Unix
-- clock however far behind the server's, and for a clock of another origin
-- (a monotonic one, whose Unix reading is in 1970) the relative expiry,
-- where PXAT alone expired every key as it was written. That relative one
-- is a second longer: Redis does not stop its clock during a script, and a
-- key of a millisecond could expire before the PEXPIREAT that lengthens it,
-- in a script held up by a loaded machine (seen in the differential tests).
local function save()
  for i, l in ipairs(limits) do
    if l.dirty then
      if l.birth == nil then l.birth = born() end
      local _, _, _, reset = l.algorithm.decide(l.cfg, l.state, now, 0)
      local key = KEYS[i]
      if reset == 0 and caller_time then
        -- Fresh, but kept a second more with its latest time: a caller's
        -- clock may step back, and a key dropped at once would then be
        -- decided in the past, admitting what the time it had seen would not.
        if l.algorithm.write then
          l.algorithm.write(key, l.state, l.birth)
          redis.call('PEXPIRE', key, 1000)
        else
          redis.call('SET', key, stored(l), 'PX', 1000)
        end
      elseif reset == 0 then
        redis.call('UNLINK', key)
      else
        local at = fmt(ceil_div(now + reset, 1000))
        local ttl = fmt(ceil_div(reset, 1000) + 1000)
        if l.algorithm.write then
          l.algorithm.write(key, l.state, l.birth)
          if caller_time then
            redis.call('PEXPIRE', key, ttl)
          else
            redis.call('PEXPIREAT', key, at)
          end
        elseif caller_time then
          redis.call('SET', key, stored(l), 'PX', ttl)
        else
          redis.call('SET', key, stored(l), 'PXAT', at)
        end
        if caller_time then redis.call('PEXPIREAT', key, at, 'GT') end
      end
    end
  end
end

-- A key's expiry is set by the call that writes its state, for the limit's
-- configuration then. After a change to a slower refill or a longer window
-- under the same name (a deploy), the state lasts longer than that, and a
-- call that writes no state (a denial) left the key to expire early: a
-- caller denied all along found it gone a second later, fresh, and was
-- admitted a whole limit again where the state admits nothing for a day.
-- Such a call lengthens the expiry (GT: never shortens it) to when the state
-- held, `reset` from now, is fresh, as save() sets it: under an unchanged
-- configuration that is the expiry the key has, and nothing changes (nor is
-- replicated). On the callers' clock the relative expiry needs `reset` (a
-- second short of save()'s, so that a few ms of latency between two calls
-- lengthen nothing) and, when lengthened, gets save()'s second: the next
-- denial finds it long enough.
local function lengthen(key, reset)
  if reset == 0 then return end
  if caller_time and redis.call('PEXPIRE', key, fmt(ceil_div(reset, 1000)), 'GT') == 1 then
    redis.call('PEXPIRE', key, fmt(ceil_div(reset, 1000) + 1000))
  end
  redis.call('PEXPIREAT', key, fmt(ceil_div(now + reset, 1000)), 'GT')
end

-- A refund only ever makes a state fresher: the key's expiry, set by the
-- call that wrote the state, is kept (KEEPTTL; a sorted set's commands keep
-- it), and lengthened (never shortened) as a denial lengthens it, to when
-- the state is fresh under the configuration the refund is given: after a
-- change to a slower refill or a longer window (a deploy), the expiry the
-- key has is the old configuration's, and a refund, the first call the key
-- saw, left it to expire early, every unit still held forgotten. The state
-- is judged at its own latest time, and the lengthening from `now`: a
-- refund's `now` may be the server's clock while the key was written on the
-- callers', where the state judged at the server's time looked fresh and
-- the key was deleted, every unit taken forgotten; a state of a clock of
-- another origin then lengthens nothing (its fresh instant is past as of the
-- server's `now`) and keeps its expiry. A state fresh as of its own latest
-- time is kept a second at most (PEXPIRE ... LT), as save() keeps a fresh
-- key on the callers' clock, which a refund cannot tell from the server's:
-- deleted, it would forget that latest time, and a caller whose clock
-- stepped back would be decided in the past, admitting what it would not.
local function save_refund()
  for i, l in ipairs(limits) do
    if l.loaded then
      local s = l.state
      local latest = s.latest or s.updated
      local _, _, _, reset = l.algorithm.decide(l.cfg, s, latest, 0)
      local key = KEYS[i]
      if l.dirty then
        if l.algorithm.write then
          l.algorithm.write(key, s, l.birth)
        else
          redis.call('SET', key, stored(l), 'KEEPTTL')
        end
      end
      if reset == 0 then
        if l.dirty then redis.call('PEXPIRE', key, 1000, 'LT') end
      else
        lengthen(key, since(now, latest + reset))
      end
    end
  end
end

-- The caller's nonce at ARGV[at], optional (see born): false when it is
-- there but not an integer in [1, 2^53).
local function read_nonce(at)
  local text = ARGV[at]
  if text == nil or text == '' then return true end
  local x = string.match(text, '^%d+$') and tonumber(text)
  if not x or x < 1 or x >= EXACT then return false end
  nonce = x
  return true
end
local function nonce_error(at)
  return redis.error_reply('ratekeeper: the nonce ' .. tostring(ARGV[at]) .. ' is not an integer from 1 below 2^53')
end

if mode == 'refund' then
  local taken_at = now
  if ARGV[pos] ~= nil and ARGV[pos] ~= '' then taken_at = tonumber(ARGV[pos]) end
  -- Guarded (the marks of a reserve's reply follow): a bucket gives back
  -- only while its key's mark is the booking's, that is while the booking
  -- is the latest outstanding on that key; a window gives back as ever. An
  -- empty count: that limit's give-back is not guarded by a mark (a
  -- cancel(), "the latest first"), false below.
  local marks, births = nil, nil
  if ARGV[pos + 1] ~= nil then
    marks = {}
    local at = pos + 1
    for i = 1, n do
      if ARGV[at] == '' then
        marks[i], at = false, at + 1
      else
        local k = tonumber(ARGV[at])
        if k == nil or k < 0 or ARGV[at + k] == nil then
          return redis.error_reply('ratekeeper: the marks of a refund end before limit ' .. i)
        end
        local mark = {}
        for j = 1, k do mark[j] = tonumber(ARGV[at + j]) end
        marks[i] = mark
        at = at + k + 1
      end
    end
    -- Then, optionally, each key's birth as the call that took the units
    -- left it (see born): a key born since gives nothing back.
    if ARGV[at] ~= nil then
      births = {}
      for i = 1, n do
        births[i] = tonumber(ARGV[at + i - 1])
        if births[i] == nil then
          return redis.error_reply('ratekeeper: the births of a refund end before limit ' .. i)
        end
      end
    end
  end
  local function latest(l, mark)
    if l.algorithm.mark == nil then return true end
    local own = l.algorithm.mark(l.cfg, l.state)
    if #own ~= #mark then return false end
    for j, x in ipairs(own) do
      if mark[j] ~= x then return false end
    end
    return true
  end
  -- Only a state read from its key holds anything to give back: an absent
  -- key, or one of another algorithm's shape, is fresh (and a fresh bucket
  -- has no time of its own to write).
  for i, l in ipairs(limits) do
    local guarded = marks ~= nil and marks[i]
    if l.loaded and (not guarded or latest(l, guarded)) and (births == nil or l.birth == births[i]) then
      for _, cost in ipairs(costs) do
        l.state = l.algorithm.refund(l.cfg, l.state, now, taken_at, cost)
      end
      l.dirty = true
    end
  end
  save_refund()
  return { now }
end
if mode ~= 'acquire' and mode ~= 'peek' and mode ~= 'reserve' then
  return redis.error_reply('ratekeeper: unknown mode ' .. tostring(mode))
end

-- Every limit's answer for `cost` from the current states: {allowed,
-- remaining, retry_after, reset_after, state}, and
-- whether all allow. When one denies, nothing is consumed anywhere: the
-- limits that would allow report their state as it stays (their answer for
-- a cost of 0).
local function decide_all(cost)
  local answers, all = {}, true
  for i, l in ipairs(limits) do
    answers[i] = { l.algorithm.decide(l.cfg, l.state, now, cost) }
    if not answers[i][1] then all = false end
  end
  if not all then
    for i, l in ipairs(limits) do
      if answers[i][1] then
        local allowed, remaining, retry, reset = l.algorithm.decide(l.cfg, l.state, now, 0)
        answers[i] = { allowed, remaining, retry, reset }
      end
    end
  end
  return answers, all
end

-- The reply's numbers for one decision: the combined answer (the tightest
-- remaining and its limit, the longest waits, the denying limit with the
-- longest wait, the first on ties), then each limit's.
local limit_of = {}
for i, l in ipairs(limits) do limit_of[i] = l.cfg.limit or l.cfg.burst end
-- A cost above a limit could never be allowed: the clients refuse it, as the
-- core does (PROTOCOL.md), and so does the script, whose algorithms assume it.
for _, cost in ipairs(costs) do
  for i = 1, n do
    if cost > limit_of[i] then
      return redis.error_reply('ratekeeper: cost ' .. fmt(cost) .. ' exceeds the limit ' .. fmt(limit_of[i]) .. ' of limit ' .. i)
    end
  end
end

-- Appends without temporary tables: a batch calls this once per cost.
local function append(reply, answers, all)
  local denied_by, tightest, retry, reset = 0, 1, 0, 0
  for i = 1, n do
    local a = answers[i]
    if not a[1] and (denied_by == 0 or a[3] > answers[denied_by][3]) then denied_by = i end
    if a[2] < answers[tightest][2] then tightest = i end
    retry, reset = max(retry, a[3]), max(reset, a[4])
  end
  local k = #reply
  reply[k + 1] = all and 1 or 0
  reply[k + 2] = denied_by
  reply[k + 3] = answers[tightest][2]
  reply[k + 4] = limit_of[tightest]
  reply[k + 5] = retry
  reply[k + 6] = reset
  k = k + 6
  -- One limit's own answer is the combined one: not sent twice.
  if n == 1 then return retry end
  for i = 1, n do
    local a = answers[i]
    reply[k + 1] = a[1] and 1 or 0
    reply[k + 2] = a[2]
    reply[k + 3] = limit_of[i]
    reply[k + 4] = a[3]
    reply[k + 5] = a[4]
    k = k + 5
  end
  return retry
end

-- Each limit's mark as this call left its key (PROTOCOL.md, "Guarded
-- refund"), flat: a count `k` then `k` integers; none for a window, nor for
-- any limit when the call wrote nothing (`wrote` false); then each key's
-- birth (see born; 0 when the call wrote nothing). A guarded refund sends
-- them back as they are.
local function marks(wrote)
  local out = {}
  for _, l in ipairs(limits) do
    local mark = {}
    if wrote and l.algorithm.mark then mark = l.algorithm.mark(l.cfg, l.state) end
    out[#out + 1] = #mark
    for _, x in ipairs(mark) do out[#out + 1] = x end
  end
  for _, l in ipairs(limits) do
    out[#out + 1] = wrote and l.birth or 0
  end
  return out
end

if mode == 'reserve' then
  -- Books the first moment every limit admits the cost, if that is at most
  -- max_wait away (the core's Policy::reserve): every limit books it at
  -- that one slot, where the request really proceeds, even a limit whose
  -- own slot comes earlier. Reply: now, booked (0/1), the wait, then the
  -- decision at now.
  local max_wait = tonumber(ARGV[pos])
  if not read_nonce(pos + 1) then return nonce_error(pos + 1) end
  local answers, all = decide_all(costs[1])
  local decision = {}
  local wait = append(decision, answers, all)
  local booked = all or wait <= max_wait
  if booked then
    local states = {}
    for i, l in ipairs(limits) do
      if all then
        states[i] = answers[i][5]
      else
        local _, _, _, _, current = l.algorithm.decide(l.cfg, l.state, now, 0)
        states[i] = l.algorithm.book(l.cfg, current, now + wait, costs[1])
        if states[i] == nil then booked = false end
      end
    end
    if booked then
      for i, l in ipairs(limits) do l.state, l.dirty = states[i], true end
      save()
    end
  end
  if not booked then
    -- (Each answer is its limit's state as it stays: a denial's, or one for a cost of 0.)
    for i = 1, n do lengthen(KEYS[i], answers[i][4]) end
  end
  local reply = { now, 0, wait }
  if booked then reply[2] = 1 end
  if all then reply[3] = 0 end
  for _, v in ipairs(decision) do reply[#reply + 1] = v end
  for _, v in ipairs(marks(booked)) do reply[#reply + 1] = v end
  return reply
end

-- The reply of acquire and peek: an array of integers, or, when the argument
-- after the costs is 'text', one string of the same integers separated by
-- spaces, which clients read several times faster than a long array (a hot
-- key's batch of 256 costs is 1537 integers). '%d' formats a Lua number as a
-- C long: exact where that has 64 bits; elsewhere the array is sent.
local as_text = ARGV[pos] == 'text' and string.format('%d', 2 ^ 53) == '9007199254740992'
if mode == 'acquire' and not read_nonce(pos + 1) then return nonce_error(pos + 1) end
-- After an acquire's decisions: each limit's mark as it left the key (see
-- marks), which a give-back of units whose caller left sends back, so that
-- a bucket gives them back only while nothing was taken after them.
-- `reply`: the array, or the strings of the text reply so far.
local function with_marks(reply, wrote)
  if mode ~= 'acquire' then return reply end
  for _, x in ipairs(marks(wrote)) do
    if as_text then reply[#reply + 1] = string.format(' %d', x) else reply[#reply + 1] = x end
  end
  return reply
end
local function answer(reply, stride, wrote)
  if not as_text then return with_marks(reply, wrote) end
  local texts, line = { string.format('%d', reply[1]) }, string.rep(' %d', stride)
  for at = 2, #reply, stride do
    texts[#texts + 1] = string.format(line, unpack(reply, at, at + stride - 1))
  end
  return table.concat(with_marks(texts, wrote))
end

local reply = { now }
if n == 1 then
  -- One limit (a hot key's batch): its answer is the combined one, decided
  -- without the tables decide_all and append build for several.
  local l = limits[1]
  local decide, cfg, state, limit = l.algorithm.decide, l.cfg, l.state, limit_of[1]
  local consume = mode == 'acquire'
  -- Formatted as decided rather than by answer(): without the numbers' trip
  -- through the table and unpack, a batch of 256 took about a fifth less
  -- server time.
  local format, line, k = string.format, ' %d %d %d %d %d %d', 1
  if as_text then reply[1] = format('%d', now) end
  -- A denial's reset_after: its state's, which it leaves as it is.
  local kept = 0
  for j = 1, m do
    local allowed, remaining, retry, reset, after = decide(cfg, state, now, costs[j])
    local yes = 0
    if allowed then
      yes = 1
      if consume then state, l.dirty = after, true end
    else
      kept = reset
    end
    if as_text then
      reply[j + 1] = format(line, yes, 1 - yes, remaining, limit, retry, reset)
    else
      reply[k + 1], reply[k + 2], reply[k + 3] = yes, 1 - yes, remaining
      reply[k + 4], reply[k + 5], reply[k + 6] = limit, retry, reset
      k = k + 6
    end
  end
  l.state = state
  if consume then save() end
  if consume and not l.dirty then lengthen(KEYS[1], kept) end
  with_marks(reply, l.dirty)
  if as_text then return table.concat(reply) end
  return reply
end
local last
for _, cost in ipairs(costs) do
  local answers, all = decide_all(cost)
  if all and mode == 'acquire' then
    for i, l in ipairs(limits) do l.state, l.dirty = answers[i][5], true end
  end
  append(reply, answers, all)
  last = answers
end
if mode == 'acquire' then
  save()
  -- Every cost denied (one allowed writes every limit): each answer is its
  -- limit's state as it stays.
  if last and not limits[1].dirty then
    for i = 1, n do lengthen(KEYS[i], last[i][4]) end
  end
end
return answer(reply, 6 + 5 * n, limits[1].dirty)
