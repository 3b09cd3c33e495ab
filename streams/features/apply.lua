-- Applies one batch of validated interaction events to the feature keys, idempotently.
--
-- ARGV = header (9) then 8 fields per event:
--   prefix, sequence length, minute buckets kept, hour buckets kept, popularity hours,
--   affinity weight of view, click, cart, purchase;
--   per event: partition, offset, user, session, item, category ('' = none), type code, ts.
-- Returns {applied, skipped}: an event counts as skipped when its user had already applied it.
--
-- Idempotence: every entity hash keeps `_p<partition>` = the last offset of that partition it
-- applied, checked and advanced in the same step as the entity's update. Events of a partition
-- arrive in offset order, so "apply only if offset > _p<partition>" is exact under crashes,
-- re-deliveries and whole-topic replays, without per-event dedupe keys. A script is atomic, and
-- even a script aborted half-way (OOM) leaves each entity consistent with its own `_p` fields.
--
-- Order independence across partitions: counters are commutative, last/first times are max/min,
-- and windowed buckets are pruned against the newest bucket seen (see streams/features/windows.py),
-- so two workers interleaving partitions differently reach the same state as one worker.
--
-- Cluster: keys are built here from the prefix and carry one hash tag per entity. On Redis
-- Cluster a batch would be split by slot (one EVALSHA per slot, keys declared in KEYS); every
-- step below touches a single entity, which is what makes that split possible.

local prefix = ARGV[1]
local SEQ_LEN = tonumber(ARGV[2])
local MINUTES = tonumber(ARGV[3])
local HOURS = tonumber(ARGV[4])
local POP_HOURS = tonumber(ARGV[5])
local WEIGHT = {
  view = tonumber(ARGV[6]), click = tonumber(ARGV[7]),
  cart = tonumber(ARGV[8]), purchase = tonumber(ARGV[9]),
}
local HEADER = 9
local FIELDS = 8

-- Explicit formats: Lua and Python format identically, so the oracle matches byte for byte.
local function int(x) return string.format('%d', x) end
local function secs(x) return string.format('%.3f', x) end

local function push(t, ...)
  for _, v in ipairs({...}) do t[#t + 1] = v end
end

-- Counts the event in its bucket (hash `<entity key>:<family>`, field = bucket number) unless it
-- already fell out of the kept range, and deletes the buckets the newest bucket pushed out. Cost
-- is bounded by min(existing buckets, buckets advanced), and a jump past the whole range is one
-- DEL, so sparse entities (most of them) stay cheap.
local function roll(key, family, bucket, old, kept, updates)
  local fkey = key .. ':' .. family
  local newest = bucket
  if old and old > newest then newest = old end
  if old and newest > old then
    local floor = newest - kept
    if floor >= old then
      redis.call('DEL', fkey)
    elseif floor > old - kept then
      local stale = {}
      if redis.call('HLEN', fkey) < newest - old then
        for _, f in ipairs(redis.call('HKEYS', fkey)) do
          if tonumber(f) <= floor then stale[#stale + 1] = f end
        end
      else
        for b = old - kept + 1, floor do stale[#stale + 1] = int(b) end
      end
      if #stale > 0 then redis.call('HDEL', fkey, unpack(stale)) end
    end
  end
  if bucket > newest - kept then
    redis.call('HINCRBY', fkey, int(bucket), 1)
  end
  if newest ~= old then push(updates, 'mx_' .. family, int(newest)) end
end

-- The common part of users, items and categories: type counters, windows, first/last time.
-- Returns nil when the entity already applied this position, else the pending HSET fields and
-- the HMGET values (index 6 onwards are the caller's extra fields).
local function counted(key, e, extra)
  local pf = '_p' .. e.p
  local got = redis.call('HMGET', key, pf, 'mx_m', 'mx_h', 'last_ts', 'first_ts', unpack(extra))
  if got[1] and tonumber(got[1]) >= e.o then return nil end
  local updates = {pf, e.o_s}
  redis.call('HINCRBY', key, 'n_' .. e.type, 1)
  roll(key, 'm', e.minute, tonumber(got[2]), MINUTES, updates)
  roll(key, 'h', e.hour, tonumber(got[3]), HOURS, updates)
  local last = tonumber(got[4])
  if not last or e.ts > last then push(updates, 'last_ts', e.ts_s) end
  local first = tonumber(got[5])
  if not first or e.ts < first then push(updates, 'first_ts', e.ts_s) end
  return updates, got, last
end

local function sequence(key, e)
  redis.call('LPUSH', key, e.item .. ' ' .. e.ts_s .. ' ' .. e.type)
  redis.call('LTRIM', key, 0, SEQ_LEN - 1)
end

local function apply_user(e)
  local key = prefix .. 'u:{' .. e.user .. '}'
  local updates, got, last = counted(key, e, {'last_purchase_ts'})
  if not updates then return false end
  -- The lag this event saw: time since the user's newest earlier event (0 if out of order).
  if last then push(updates, 'prev_gap', secs(math.max(0, e.ts - last))) end
  if e.type == 'purchase' then
    local purchased = tonumber(got[6])
    if not purchased or e.ts > purchased then push(updates, 'last_purchase_ts', e.ts_s) end
  end
  if e.category ~= '' then
    redis.call('HINCRBY', key, 'aff:' .. e.category, WEIGHT[e.type])
  end
  redis.call('HSET', key, unpack(updates))
  sequence(key .. ':seq', e)
  return true
end

local function apply_session(e)
  local key = prefix .. 's:{' .. e.session .. '}'
  local pf = '_p' .. e.p
  local got = redis.call('HMGET', key, pf, 'last_ts', 'start_ts', 'gap_sum', 'gap_max')
  if got[1] and tonumber(got[1]) >= e.o then return end
  local updates = {pf, e.o_s, 'user', e.user}
  redis.call('HINCRBY', key, 'n', 1)
  local last = tonumber(got[2])
  if last then
    local gap = math.max(0, e.ts - last)
    local widest = tonumber(got[5]) or 0
    if gap > widest then widest = gap end
    push(updates, 'last_gap', secs(gap), 'gap_sum', secs((tonumber(got[4]) or 0) + gap),
      'gap_max', secs(widest))
    if e.ts > last then push(updates, 'last_ts', e.ts_s) end
    if e.ts < tonumber(got[3]) then push(updates, 'start_ts', e.ts_s) end
  else
    push(updates, 'last_ts', e.ts_s, 'start_ts', e.ts_s)
  end
  redis.call('HSET', key, unpack(updates))
  sequence(key .. ':seq', e)
end

local function apply_item(e)
  local key = prefix .. 'i:{' .. e.item .. '}'
  local updates, got, last = counted(key, e, {'cat'})
  if not updates then return end
  -- The category of the newest event (ties: the greater name), independent of arrival order.
  if e.category ~= '' then
    local cat = got[6]
    if not cat or not last or e.ts > last or (e.ts == last and e.category > cat) then
      push(updates, 'cat', e.category)
    end
  end
  redis.call('HSET', key, unpack(updates))
end

local function apply_category(e)
  if e.category == '' then return end
  local key = prefix .. 'c:{' .. e.category .. '}'
  local updates = counted(key, e, {})
  if updates then redis.call('HSET', key, unpack(updates)) end
end

-- Global totals (priors of the target encodings) and hourly item popularity sorted sets. This is
-- one hot key by design: on a cluster it would be split per category or per item-id hash.
local function apply_popularity(e)
  local key = prefix .. 'pop:{all}'
  local pf = '_p' .. e.p
  local got = redis.call('HMGET', key, pf, 'mx_h')
  if got[1] and tonumber(got[1]) >= e.o then return end
  redis.call('HINCRBY', key, 'n_' .. e.type, 1)
  local old = tonumber(got[2])
  local newest = e.hour
  if old then
    if old > newest then newest = old end
    local stale = {}
    for h = old - POP_HOURS + 1, math.min(old, newest - POP_HOURS) do
      stale[#stale + 1] = key .. ':h' .. int(h)
    end
    if #stale > 0 then redis.call('DEL', unpack(stale)) end
  end
  if e.hour > newest - POP_HOURS then
    redis.call('ZINCRBY', key .. ':h' .. int(e.hour), 1, e.item)
  end
  redis.call('HSET', key, pf, e.o_s, 'mx_h', int(newest))
end

local applied, skipped = 0, 0
for b = HEADER, #ARGV - FIELDS, FIELDS do
  -- Offsets are exact as Lua numbers (doubles) up to 2^53.
  local ts = tonumber(ARGV[b + 8])
  local e = {
    p = ARGV[b + 1], o_s = ARGV[b + 2], o = tonumber(ARGV[b + 2]),
    user = ARGV[b + 3], session = ARGV[b + 4], item = ARGV[b + 5], category = ARGV[b + 6],
    type = ARGV[b + 7], ts_s = ARGV[b + 8], ts = ts,
    minute = math.floor(ts / 60), hour = math.floor(ts / 3600),
  }
  if apply_user(e) then applied = applied + 1 else skipped = skipped + 1 end
  apply_session(e)
  apply_item(e)
  apply_category(e)
  apply_popularity(e)
end
return {applied, skipped}
