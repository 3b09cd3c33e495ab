#!lua name=streamrec_features
-- Merges entities' folded shares of a batch of interaction events into their state,
-- idempotently: one or more entities per call, each as if called alone, in KEYS order.
--
-- KEYS = the entities' keys (`u:{id}`, `s:{id}`, `i:{id}`, `c:{id}` or a popularity shard
--   `pop:{n}`); every other key an entity's update writes is its key plus a suffix (`:m`, `:h`,
--   `:seq`, `:h<hour>`), so an update touches one entity and one hash slot, and a call whose
--   keys share a slot stays in that slot (Redis Cluster-ready; on one Redis any keys go).
-- ARGV = sequence length, minute buckets kept, hour buckets kept, popularity hours, user TTL
--   (s), session TTL (s), the writer's wall clock in ms when it sent the call, then one
--   MessagePack array of one array per key: the entity kind (u, s, i, c, p), then the update
--   streams/feature_worker/fold.py builds (read in order below): the partitions it folds (an
--   array of {the `_p<partition>` field, first offset, last offset, the offset the entity's
--   previous piece of the same batch ends at or -1}), the counter deltas (field, delta, ...),
--   for users, items and categories the minute and the hour bucket counts (bucket, count, ...
--   each), then what the kind needs (see each merge below). Counts, offsets and buckets are
--   numbers; times, ids, categories and sequence entries are text, stored as sent.
-- Returns one code per key: 0 when merged, 1 when every event was already applied (a
--   re-delivery: nothing written), 2 when only some were (refused, nothing written: the writer
--   sends those events one update each, which Redis then applies or skips one by one).
--
-- Several entities per call, their updates in one MessagePack value: entering a script, turning
-- each argument into a Lua string and reading them one by one in Lua cost about as much as one
-- small entity's merge, where unpacking one value into ready tables (in C) costs a fraction. The writer packs
-- entities into calls up to bounds on their number and events (writer.py) that keep a call
-- short.
--
-- The worker groups each batch per entity and folds each entity's events in stream order, so
-- the state equals applying the events one at a time in stream order: entities never read each
-- other, so only the order within an entity matters (tests/feature_oracle.py is that reference).
--
-- Idempotence: every entity hash keeps `_p<partition>` = the last offset of that partition it
-- applied, checked and advanced together with the entity's update. Events of a partition arrive
-- in offset order, so an update whose offsets are all above `_p<partition>` (or that continues
-- exactly where the previous piece ended) is new, one whose last offset is not above it is a
-- re-delivery, and only a crash between two differently cut batches leaves one in between.
--
-- Atomicity: the `#!lua` shebang makes Redis check memory once, before the script runs, so an
-- OOM cannot abort it half-way; an entity's update is applied entirely or not at all.
--
-- Cost: one HMGET, one HSET (counters included), an HINCRBY per distinct bucket, one LPUSH per
-- sequence (and an LTRIM once it is full), and for users and sessions a PEXPIREAT per key when
-- their expiry time is re-set (see Expiry): per entity and batch, whatever its number of
-- events. Per event only a session's times (its gaps depend on the stored last time) and an
-- item's times and categories (its newest category likewise).
--
-- Order independence across partitions: counters are commutative, last/first times are max/min,
-- and windowed buckets keep only those within `kept` of the newest bucket seen (see
-- streams/features/windows.py), so any interleaving of partitions reaches the same state.
--
-- Feature freshness: a user update stores `lag_ms` = the writer's clock when it sent the call
-- minus the entered time (the record's Kafka time) of its newest event in stream order: how
-- long the pipeline took to bring the user's newest event into Redis, whatever that event's own
-- (event) time. The clock comes from the writer, not Redis `TIME`: the worker's ACL user runs
-- only @read/@write/@scripting commands, and the call runs within the round trip that follows.
-- It and `ttl_from_ms` (below) are the only fields the events do not determine (exactness
-- tests leave them out of their comparisons). An update not merged (a re-delivery, a replay)
-- leaves both as they were.
--
-- Expiry: every key of a user (`u:{id}`, its `:m`/`:h` buckets, `:seq`) and of a session
-- (`s:{id}`, `:seq`) expires at one time, `ttl_from_ms` (a field of the entity's hash, the
-- writer's clock) plus the TTL. A write re-sets `ttl_from_ms` to its own clock once
-- TTL_RESET_SHARE of the TTL has passed since it was set, and a key a write creates in between
-- (a sequence list, a bucket hash a window jump deleted) gets the same time. So an entity
-- expires between 99% and 100% of its TTL after its last write, and most writes set no
-- expiry: re-setting it on every write took about 5% of Redis's time per live event. The TTL
-- is wall-clock time, not event time, so a replay of old history is not expired on arrival.
-- Items, categories and popularity keep no TTL: their buckets are bounded by their windows,
-- and their number by the catalog.

-- (`-- stage:` markers let `streamrec bench script` time the script's parts.)
-- Locals: each use of a global is a table lookup in Lua 5.1, and the merge makes these calls
-- per field. Everything below `apply` is defined once, when Redis loads the library; a call
-- runs `apply` only.
-- Redis 7.0 gives a library's loading code no globals at all, so the first call takes them
-- (`globals` is defined before the locals of the same names: its body reads the globals).
local function globals()
  return tonumber, string.format, unpack, ipairs, pairs, math.max, math.min, redis.call,
    cmsgpack.unpack
end
local tonumber, format, unpack, ipairs, pairs, max, min, call, unpack_msgpack
local TTL_RESET_SHARE = 0.01
local NEWEST = {m = 'mx_m', h = 'mx_h'}
-- Set at each call from its arguments.
local SEQ_LEN, POP_HOURS, SENT_MS
local KEPT, TTL = {}, {}

-- The entity being merged (set for each key in turn) and what its update holds; for users and
-- sessions, when its keys expire (ms) and whether this write re-sets that time.
local KEY, KIND, WINDOWED, EXPIRES_AT, RESET
local v, set, fields, parts, counters, buckets, seq, pop

local update, at
local function arg() at = at + 1; return update[at] end

-- parts: {`_p<partition>`, first, last, expected or -1} each (offsets are exact as doubles up to
-- 2^53); counters: field, delta, ...; buckets: per family, bucket, count, ...
local function parse()
  parts, counters = update[2], update[3]
  if WINDOWED then
    buckets = {m = update[4], h = update[5]}
    at = 5
  else
    at = 3
  end
end

-- Explicit formats: Lua and Python format identically, so the oracle matches byte for byte.
local function int(x) return format('%d', x) end
local function secs(x) return format('%.3f', x) end

local LOADED = {
  u = {'mx_m', 'mx_h', 'last_ts', 'first_ts', 'last_purchase_ts', 'ttl_from_ms'},
  s = {'last_ts', 'start_ts', 'gap_sum', 'gap_max', 'ttl_from_ms'},
  i = {'mx_m', 'mx_h', 'last_ts', 'first_ts', 'cat'},
  c = {'mx_m', 'mx_h', 'last_ts', 'first_ts'},
  p = {'mx_h'},
}
local function fields_to_load()
  local names = {unpack(LOADED[KIND])}
  local n = #names
  for i = 1, #parts do n = n + 1; names[n] = parts[i][1] end
  for i = 1, #counters, 2 do n = n + 1; names[n] = counters[i] end
  return names
end

-- New (0), re-delivered (1), or partly applied (2): see Idempotence above.
local function novelty()
  local new, old = 0, 0
  for _, part in ipairs(parts) do
    local done = tonumber(v[part[1]])
    local first, last, expect = part[2], part[3], part[4]
    if expect >= 0 then
      if done == expect then new = new + 1 elseif done and done >= last then old = old + 1 end
    elseif not done or done < first then
      new = new + 1
    elseif done >= last then
      old = old + 1
    end
  end
  if old == #parts then return 1 end
  if new < #parts then return 2 end
  return 0
end

-- `set` maps each field written to its value's place in `fields`, the HSET's arguments.
local function put(f, value)
  v[f] = value
  local at = set[f]
  if at then
    fields[at] = value
  else
    at = #fields + 2
    fields[at - 1], fields[at] = f, value
    set[f] = at
  end
end
-- Counters are written with the entity's HSET (the script is atomic, so read + add is an
-- increment): their fields were loaded with the HMGET.
local function add(f, n) put(f, int((tonumber(v[f]) or 0) + n)) end

-- The newest and oldest time of the update against the stored ones (first/last times).
local function extremes(newest_s, oldest_s)
  local last = tonumber(v.last_ts)
  if newest_s and (not last or tonumber(newest_s) > last) then put('last_ts', newest_s) end
  local first = tonumber(v.first_ts)
  if not first or tonumber(oldest_s) < first then put('first_ts', oldest_s) end
end

-- EXPIRES_AT and RESET for the entity (see Expiry); neither for kinds without a TTL.
local function expiry()
  local ttl = TTL[KIND]
  local from = tonumber(v.ttl_from_ms)
  RESET = ttl ~= nil and (not from or SENT_MS - from >= ttl * 1000 * TTL_RESET_SHARE)
  if RESET then from = SENT_MS end
  EXPIRES_AT = ttl and int(from + ttl * 1000)
end

local function merge_user()
  local newest_s, earlier_s, max_s, min_s, purchase_s = arg(), arg(), arg(), arg(), arg()
  local entered = arg()
  -- The lag the newest event saw: time since the user's newest earlier event, stored or in
  -- this update (0 if out of order); a first event ever has none.
  local before = tonumber(v.last_ts)
  local earlier = tonumber(earlier_s)
  if earlier and (not before or earlier > before) then before = earlier end
  if before then put('prev_gap', secs(max(0, tonumber(newest_s) - before))) end
  extremes(max_s, min_s)
  if purchase_s ~= '' then
    local purchased = tonumber(v.last_purchase_ts)
    if not purchased or tonumber(purchase_s) > purchased then put('last_purchase_ts', purchase_s) end
  end
  put('lag_ms', int(max(0, SENT_MS - entered)))
  seq = arg()
end

local function merge_session()
  put('user', arg())
  -- Each gap is from the session's newest time so far, stored ones included: one by one.
  for _, ts_s in ipairs(arg()) do
    local ts = tonumber(ts_s)
    local last = tonumber(v.last_ts)
    if last then
      local gap = max(0, ts - last)
      local widest = tonumber(v.gap_max) or 0
      if gap > widest then widest = gap end
      put('last_gap', secs(gap))
      put('gap_sum', secs((tonumber(v.gap_sum) or 0) + gap))
      put('gap_max', secs(widest))
      if ts > last then put('last_ts', ts_s) end
      if ts < tonumber(v.start_ts) then put('start_ts', ts_s) end
    else
      put('last_ts', ts_s)
      put('start_ts', ts_s)
    end
  end
  seq = arg()
end

local function merge_item()
  extremes(nil, arg())
  -- The category of the newest event (ties: the greater name), against the newest time so
  -- far, stored ones included: one by one (time, category, ...).
  local events = arg()
  for i = 1, #events, 2 do
    local ts_s, category = events[i], events[i + 1]
    local ts = tonumber(ts_s)
    local last = tonumber(v.last_ts)
    if not last or ts > last then put('last_ts', ts_s) end
    if category ~= '' then
      local cat = v.cat
      if not cat or not last or ts > last or (ts == last and category > cat) then
        put('cat', category)
      end
    end
  end
end

local function merge_category() extremes(arg(), arg()) end

-- One shard of the global totals (priors of the target encodings) and of the hourly item
-- popularity sorted sets: the worker sends each item's events to its shard (by item id hash).
local function merge_popularity()
  local newest, counts = arg(), arg()
  -- hour, item, count, ...
  for i = 1, #counts, 3 do
    local hour = counts[i]
    pop[hour] = pop[hour] or {}
    pop[hour][counts[i + 1]] = counts[i + 2]
  end
  return newest
end

-- Deletes what fell out of (newest - kept, newest] since the stored newest bucket `old`: a jump
-- past the whole range is one DEL; otherwise one HDEL of the buckets the window left behind
-- (every stored bucket is newer than old - kept), named from that range or, when the hash holds
-- fewer fields than the range has buckets (a sparse entity's jump of many hours), from HKEYS.
-- True when it deleted any (the hash may be gone, to be re-created by the counts).
local function prune_buckets(fkey, old, newest, kept)
  local floor = newest - kept
  if floor >= old then
    call('DEL', fkey)
    return true
  end
  local from = old - kept + 1
  if floor < from then return false end
  local stale = {}
  if floor - from >= 2 and call('HLEN', fkey) <= floor - from then
    for _, b in ipairs(call('HKEYS', fkey)) do
      if tonumber(b) <= floor then stale[#stale + 1] = b end
    end
    if #stale == 0 then return false end
  else
    for b = from, floor do stale[#stale + 1] = int(b) end
  end
  call('HDEL', fkey, unpack(stale))
  return true
end

-- Buckets are pruned and counted against the update's final newest bucket: an event older than
-- that window would have been counted and then pruned anyway, so the state is the same.
local function write_buckets(family)
  local counts = buckets[family]
  local old = tonumber(v[NEWEST[family]])
  local newest = old
  for i = 1, #counts, 2 do
    local b = counts[i]
    if not newest or b > newest then newest = b end
  end
  local kept = KEPT[family]
  local fkey = KEY .. ':' .. family
  local pruned = old and newest > old and prune_buckets(fkey, old, newest, kept)
  for i = 1, #counts, 2 do
    local b = counts[i]
    if b > newest - kept then call('HINCRBY', fkey, int(b), counts[i + 1]) end
  end
  -- The newest bucket is always among those written, so the hash exists here.
  if RESET or (pruned and EXPIRES_AT) then call('PEXPIREAT', fkey, EXPIRES_AT) end
  if newest ~= old then put(NEWEST[family], int(newest)) end
end

local function write_popularity(newest_in_update)
  local old = tonumber(v.mx_h)
  local newest = newest_in_update
  if old and old > newest then newest = old end
  if old and newest > old then
    local stale = {}
    for h = old - POP_HOURS + 1, min(old, newest - POP_HOURS) do
      stale[#stale + 1] = KEY .. ':h' .. int(h)
    end
    if #stale > 0 then call('DEL', unpack(stale)) end
  end
  for h, items in pairs(pop) do
    if h > newest - POP_HOURS then
      local zkey = KEY .. ':h' .. int(h)
      for item, n in pairs(items) do call('ZINCRBY', zkey, n, item) end
    end
  end
  if newest ~= old then put('mx_h', int(newest)) end
end

local function write()
  if RESET then put('ttl_from_ms', int(SENT_MS)) end
  call('HSET', KEY, unpack(fields))
  if RESET then call('PEXPIREAT', KEY, EXPIRES_AT) end
  if seq and #seq > 0 then
    -- Pushed oldest first, so the list reads newest first; only the newest SEQ_LEN matter
    -- (LPUSH answers the new length: a list not yet full, most sessions', needs no LTRIM; a
    -- length of just the pushed entries, a list this write created).
    local seq_key = KEY .. ':seq'
    local n = call('LPUSH', seq_key, unpack(seq))
    if n > SEQ_LEN then call('LTRIM', seq_key, 0, SEQ_LEN - 1) end
    if RESET or (n == #seq and EXPIRES_AT) then call('PEXPIREAT', seq_key, EXPIRES_AT) end
  end
end

-- The entity KEY's update: its reply code.
local function merge_entity()
  parse()
  -- stage: parsed
  local names = fields_to_load()
  -- stage: defined
  local got = call('HMGET', KEY, unpack(names))
  for i, f in ipairs(names) do v[f] = got[i] end
  local novel = novelty()
  if novel ~= 0 then return novel end

  expiry()
  for _, part in ipairs(parts) do put(part[1], int(part[3])) end
  for i = 1, #counters, 2 do add(counters[i], counters[i + 1]) end
  local pop_newest = nil
  if KIND == 'u' then merge_user()
  elseif KIND == 's' then merge_session()
  elseif KIND == 'i' then merge_item()
  elseif KIND == 'c' then merge_category()
  else pop_newest = merge_popularity()
  end
  -- stage: folded
  if pop_newest then
    write_popularity(pop_newest)
  elseif WINDOWED then
    write_buckets('m')
    write_buckets('h')
  end
  write()
  return 0
end

local function apply(keys, args)
  -- stage: called
  if not call then
    tonumber, format, unpack, ipairs, pairs, max, min, call, unpack_msgpack = globals()
  end
  SEQ_LEN = tonumber(args[1])
  KEPT.m, KEPT.h = tonumber(args[2]), tonumber(args[3])
  POP_HOURS = tonumber(args[4])
  TTL.u, TTL.s = tonumber(args[5]), tonumber(args[6])
  SENT_MS = tonumber(args[7])
  local updates = unpack_msgpack(args[8])
  local replies = {}
  for e = 1, #keys do
    KEY, update = keys[e], updates[e]
    KIND = update[1]
    WINDOWED = KIND == 'u' or KIND == 'i' or KIND == 'c'
    v, set, fields, seq, pop = {}, {}, {}, nil, KIND == 'p' and {} or nil
    replies[e] = merge_entity()
  end
  return replies
end

redis.register_function('streamrec_apply', apply)
