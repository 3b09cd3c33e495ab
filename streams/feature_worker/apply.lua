#!lua
-- Applies one entity's share of a batch of validated interaction events, idempotently.
--
-- KEYS[1] = the entity's key (`u:{id}`, `s:{id}`, `i:{id}`, `c:{id}` or a popularity shard
--   `pop:{n}`); every other key the call writes is that key plus a suffix (`:m`, `:h`, `:seq`,
--   `:h<hour>`), so one call touches one entity and one hash slot (Redis Cluster-ready).
-- ARGV = sequence length, minute buckets kept, hour buckets kept, popularity hours, affinity
--   weight of view, click, cart, purchase, user TTL (s), session TTL (s), the entity kind
--   (u, s, i, c, p), and the entity's events in arrival order as ONE text argument: one line per
--   event, tab-separated: partition, offset, user, session, item, category ('' = none), type
--   code, ts, entered (ms: the record's Kafka time, else the event time). (Ids are printable
--   ASCII without whitespace, so tabs and newlines are free.) Last, the writer's wall clock in
--   ms when it sent the call.
-- Returns {applied, skipped}: events this entity applied, and those it had already applied.
--
-- The worker (streams/feature_worker/batch.py) groups each batch per entity, keeping
-- the events' order, so the state equals applying the events one at a time in stream order:
-- entities never read each other, so only the order within an entity matters.
--
-- Idempotence: every entity hash keeps `_p<partition>` = the last offset of that partition it
-- applied, checked and advanced together with the entity's update. Events of a partition arrive
-- in offset order, so "apply only if offset > _p<partition>" is exact under crashes,
-- re-deliveries and whole-topic replays, without per-event dedupe keys.
--
-- Atomicity: the `#!lua` shebang makes Redis check memory once, before the script runs, so an
-- OOM cannot abort it half-way; an entity's update is applied entirely or not at all.
--
-- Cost: the events are folded in Lua first (one HMGET, then in-memory), and the entity is
-- written back once: HINCRBY per distinct bucket, one HSET (counters included), one LPUSH per
-- sequence (and an LTRIM once it is full). A hot entity (a category, a popular item, a session's
-- burst) costs a few commands per batch instead of a few per event.
--
-- Order independence across partitions: counters are commutative, last/first times are max/min,
-- and windowed buckets keep only those within `kept` of the newest bucket seen (see
-- streams/features/windows.py), so any interleaving of partitions reaches the same state.
--
-- Feature freshness: a user call that applies events stores `lag_ms` = the writer's clock when
-- it sent the call minus the entered time of the newest event it applied in stream order: how
-- long the pipeline took to bring the user's newest event into Redis, whatever that event's own
-- (event) time. The clock comes from the writer, not Redis `TIME`: the worker's ACL user runs
-- only @read/@write/@scripting commands, and the call runs within the round trip that follows.
-- It is the only field the events do not determine (exactness tests leave it out of their
-- comparisons). A call that applies nothing (a re-delivery, a replay) leaves `lag_ms` as it was.
--
-- Expiry: every key of a user (`u:{id}`, its `:m`/`:h` buckets, `:seq`) and of a session
-- (`s:{id}`, `:seq`) gets its TTL (re)set whenever this script writes it, so an entity expires
-- only after a whole TTL without events; the TTL is wall-clock time since the last write, not
-- event time, so a replay of old history is not expired on arrival. Items, categories and
-- popularity keep no TTL: their buckets are bounded by their windows, and their number by the
-- catalog.

-- (`-- stage:` markers let `streamrec bench script` time the script's parts.)
-- stage: called
local KEY = KEYS[1]
local SEQ_LEN = tonumber(ARGV[1])
local KEPT = {m = tonumber(ARGV[2]), h = tonumber(ARGV[3])}
local POP_HOURS = tonumber(ARGV[4])
local WEIGHT = {
  view = tonumber(ARGV[5]), click = tonumber(ARGV[6]),
  cart = tonumber(ARGV[7]), purchase = tonumber(ARGV[8]),
}
local TTL = {user = tonumber(ARGV[9]), session = tonumber(ARGV[10])}
local KIND = ARGV[11]
local SENT_MS = tonumber(ARGV[13])
local LINE = '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)'
  .. '\t([^\t]*)$'

-- Explicit formats: Lua and Python format identically, so the oracle matches byte for byte.
local function int(x) return string.format('%d', x) end
local function secs(x) return string.format('%.3f', x) end

local events = {}
for line in string.gmatch(ARGV[12], '[^\n]+') do
  local p, o, user, session, item, category, kind, ts_s, entered = string.match(line, LINE)
  -- Offsets are exact as Lua numbers (doubles) up to 2^53.
  local ts = tonumber(ts_s)
  events[#events + 1] = {
    p = p, o_s = o, o = tonumber(o), user = user, session = session, item = item,
    category = category, type = kind, ts_s = ts_s, ts = ts, entered = tonumber(entered),
    minute = math.floor(ts / 60), hour = math.floor(ts / 3600),
  }
end

-- Fields loaded with the entity besides its own: the `_p` of every partition in the call and
-- the counters its events add to.
-- stage: parsed
local PARTS = {}
do
  local seen = {}
  local function need(f)
    if not seen[f] then seen[f] = true; PARTS[#PARTS + 1] = f end
  end
  for _, e in ipairs(events) do
    need('_p' .. e.p)
    if KIND == 's' then
      need('n')
    else
      need('n_' .. e.type)
      if KIND == 'u' and e.category ~= '' then need('aff:' .. e.category) end
    end
  end
end

local cache, order = {}, {}

-- The entity's state, loaded with one HMGET on first touch: v = values (false when missing),
-- set = fields to HSET (counters included), b/top = bucket counts and newest bucket,
-- ttl = seconds every key of the entity lives after a write (nil: no expiry).
local function entity(key, fields, ttl)
  local c = cache[key]
  if c then return c end
  local names = {}
  for _, f in ipairs(PARTS) do names[#names + 1] = f end
  for _, f in ipairs(fields) do names[#names + 1] = f end
  local got = redis.call('HMGET', key, unpack(names))
  c = {key = key, v = {}, set = {}, b = {m = {}, h = {}}, top = {}, seq = nil, ttl = ttl}
  for i, f in ipairs(names) do c.v[f] = got[i] end
  cache[key] = c
  order[#order + 1] = key
  return c
end

local function put(c, f, value) c.v[f] = value; c.set[f] = value end
-- Counters are written with the entity's HSET (the script is atomic, so read + add is an
-- increment): their fields are loaded with the HMGET (PARTS above).
local function add(c, f, n) put(c, f, int((tonumber(c.v[f]) or 0) + n)) end

local applied, skipped = 0, 0
local newest_entered = nil  -- entered time (ms) of the newest event a user call applied

local function claim(c, e)
  local pf = '_p' .. e.p
  local done = c.v[pf]
  if done and tonumber(done) >= e.o then
    skipped = skipped + 1
    return false
  end
  put(c, pf, e.o_s)
  applied = applied + 1
  return true
end

local function bucket(c, family, b)
  c.b[family][b] = (c.b[family][b] or 0) + 1
  local top = c.top[family] or tonumber(c.v['mx_' .. family])
  if not top or b > top then top = b end
  c.top[family] = top
end

-- Type counter, windows, first/last time; returns the previous last time (nil if none).
local function counted(c, e)
  add(c, 'n_' .. e.type, 1)
  bucket(c, 'm', e.minute)
  bucket(c, 'h', e.hour)
  local last = tonumber(c.v.last_ts)
  if not last or e.ts > last then put(c, 'last_ts', e.ts_s) end
  local first = tonumber(c.v.first_ts)
  if not first or e.ts < first then put(c, 'first_ts', e.ts_s) end
  return last
end

local function sequence(c, e)
  c.seq = c.seq or {}
  c.seq[#c.seq + 1] = e.item .. ' ' .. e.ts_s .. ' ' .. e.type
end

local function apply_user(e)
  local c = entity(KEY,
    {'mx_m', 'mx_h', 'last_ts', 'first_ts', 'last_purchase_ts'}, TTL.user)
  if not claim(c, e) then return false end
  newest_entered = e.entered
  local last = counted(c, e)
  -- The lag this event saw: time since the user's newest earlier event (0 if out of order).
  if last then put(c, 'prev_gap', secs(math.max(0, e.ts - last))) end
  if e.type == 'purchase' then
    local purchased = tonumber(c.v.last_purchase_ts)
    if not purchased or e.ts > purchased then put(c, 'last_purchase_ts', e.ts_s) end
  end
  if e.category ~= '' then add(c, 'aff:' .. e.category, WEIGHT[e.type]) end
  sequence(c, e)
  return true
end

local function apply_session(e)
  local c = entity(KEY,
    {'last_ts', 'start_ts', 'gap_sum', 'gap_max'}, TTL.session)
  if not claim(c, e) then return end
  put(c, 'user', e.user)
  add(c, 'n', 1)
  local last = tonumber(c.v.last_ts)
  if last then
    local gap = math.max(0, e.ts - last)
    local widest = tonumber(c.v.gap_max) or 0
    if gap > widest then widest = gap end
    put(c, 'last_gap', secs(gap))
    put(c, 'gap_sum', secs((tonumber(c.v.gap_sum) or 0) + gap))
    put(c, 'gap_max', secs(widest))
    if e.ts > last then put(c, 'last_ts', e.ts_s) end
    if e.ts < tonumber(c.v.start_ts) then put(c, 'start_ts', e.ts_s) end
  else
    put(c, 'last_ts', e.ts_s)
    put(c, 'start_ts', e.ts_s)
  end
  sequence(c, e)
end

local function apply_item(e)
  local c = entity(KEY, {'mx_m', 'mx_h', 'last_ts', 'first_ts', 'cat'})
  if not claim(c, e) then return end
  local last = counted(c, e)
  -- The category of the newest event (ties: the greater name), independent of arrival order.
  if e.category ~= '' then
    local cat = c.v.cat
    if not cat or not last or e.ts > last or (e.ts == last and e.category > cat) then
      put(c, 'cat', e.category)
    end
  end
end

local function apply_category(e)
  if e.category == '' then return end
  local c = entity(KEY, {'mx_m', 'mx_h', 'last_ts', 'first_ts'})
  if claim(c, e) then counted(c, e) end
end

-- One shard of the global totals (priors of the target encodings) and of the hourly item
-- popularity sorted sets: the worker sends each item's events to its shard (by item id hash).
local pop_key = KEY
local pop_items = {}
local function apply_popularity(e)
  local c = entity(pop_key, {'mx_h'})
  if not claim(c, e) then return end
  add(c, 'n_' .. e.type, 1)
  local top = c.top.h or tonumber(c.v.mx_h)
  if not top or e.hour > top then top = e.hour end
  c.top.h = top
  local hour = pop_items[e.hour] or {}
  hour[e.item] = (hour[e.item] or 0) + 1
  pop_items[e.hour] = hour
end

-- Deletes what fell out of (newest - kept, newest] since the stored newest bucket `old`: a jump
-- past the whole range is one DEL; otherwise one HDEL of the buckets the window left behind
-- (fewer than `kept` names; every stored bucket is newer than old - kept).
local function prune_buckets(fkey, old, newest, kept)
  local floor = newest - kept
  if floor >= old then
    redis.call('DEL', fkey)
    return
  end
  if floor <= old - kept then return end
  local stale = {}
  for b = old - kept + 1, floor do stale[#stale + 1] = int(b) end
  redis.call('HDEL', fkey, unpack(stale))
end

-- Buckets are pruned and counted against the batch's final newest bucket: an event older than
-- that window would have been counted and then pruned anyway, so the state is the same.
local function write_buckets(c, family)
  local newest = c.top[family]
  if not newest then return end
  local kept = KEPT[family]
  local fkey = c.key .. ':' .. family
  local old = tonumber(c.v['mx_' .. family])
  if old and newest > old then prune_buckets(fkey, old, newest, kept) end
  for b, n in pairs(c.b[family]) do
    if b > newest - kept then redis.call('HINCRBY', fkey, int(b), n) end
  end
  -- The newest bucket is always among those written, so the hash exists here.
  if c.ttl then redis.call('EXPIRE', fkey, c.ttl) end
  if newest ~= old then c.set['mx_' .. family] = int(newest) end
end

local function write_popularity(c)
  local newest = c.top.h
  if not newest then return end
  local old = tonumber(c.v.mx_h)
  if old and newest > old then
    local stale = {}
    for h = old - POP_HOURS + 1, math.min(old, newest - POP_HOURS) do
      stale[#stale + 1] = pop_key .. ':h' .. int(h)
    end
    if #stale > 0 then redis.call('DEL', unpack(stale)) end
  end
  for h, items in pairs(pop_items) do
    if h > newest - POP_HOURS then
      local zkey = pop_key .. ':h' .. int(h)
      for item, n in pairs(items) do redis.call('ZINCRBY', zkey, n, item) end
    end
  end
  if newest ~= old then c.set.mx_h = int(newest) end
end

local function write(c)
  if KIND == 'p' then
    write_popularity(c)
  else
    write_buckets(c, 'm')
    write_buckets(c, 'h')
  end
  local fields = {}
  for f, value in pairs(c.set) do fields[#fields + 1] = f; fields[#fields + 1] = value end
  if #fields > 0 then
    redis.call('HSET', c.key, unpack(fields))
    if c.ttl then redis.call('EXPIRE', c.key, c.ttl) end
  end
  if c.seq then
    -- Pushed oldest first, so the list reads newest first; only the newest SEQ_LEN matter
    -- (LPUSH answers the new length: a list not yet full, most sessions', needs no LTRIM).
    local seq_key = c.key .. ':seq'
    local n = redis.call('LPUSH', seq_key, unpack(c.seq, math.max(1, #c.seq - SEQ_LEN + 1)))
    if n > SEQ_LEN then redis.call('LTRIM', seq_key, 0, SEQ_LEN - 1) end
    if c.ttl then redis.call('EXPIRE', seq_key, c.ttl) end
  end
end

local APPLY = {
  u = apply_user, s = apply_session, i = apply_item, c = apply_category, p = apply_popularity,
}
-- stage: defined
local apply = APPLY[KIND]
for _, e in ipairs(events) do apply(e) end
if newest_entered then put(cache[KEY], 'lag_ms', int(math.max(0, SENT_MS - newest_entered))) end
-- stage: folded
for _, key in ipairs(order) do write(cache[key]) end
return {applied, skipped}
