-- Applies a batch of write operations (events) of one namespace, in order, atomically.
-- KEYS[1] = P..'podn'; then, per op, its keys: request keys (S) or engine keys (T, R), then the
-- engine keys written by S.
-- ARGV: 1 P (the namespace prefix '{...}:'), 2 entry TTL ms (0: none), 3 mapping TTL ms,
-- 4 max entries per key, 5 op count; then per op: kind (S store, T tier update, R remove,
-- C clear, X remove pod), pod id, pod name, group, tier code, lease token ('' : not fenced),
-- n, m, then the m mapping values (S).
-- Reply, per op: status (0 ok, 1 pod not registered under this id: re-register, 2 fenced),
-- a, b, c (S/T: added, evicted, resolved; R: resolved, removed, 0), u, then u indexes of
-- unknown engine keys.
local P = ARGV[1]
local ttl = tonumber(ARGV[2])
local mttl = tonumber(ARGV[3])
local maxBytes = tonumber(ARGV[4]) * 8
local count = tonumber(ARGV[5])
local podn = KEYS[1]
local epochs = {}
local function epochOf(id)
  local e = epochs[id]
  if not e then
    e = tonumber(redis.call('HGET', P .. 'epoch', id) or '0')
    epochs[id] = e
  end
  return e
end
local keysCreated, keysDeleted, newMappings = 0, 0, 0
-- per call: registrations and leases checked once per pod, entry counts added up per pod and tier
local registered, leased, counts = {}, {}, {}
local function flushCounts(id)
  local c = counts[id]
  if c then
    for t, d in pairs(c) do
      if d ~= 0 then redis.call('HINCRBY', P .. 'c:' .. id, t, d) end
    end
    counts[id] = nil
  end
end
local out = {}
local ki, ai = 2, 6

local function uncount(e)
  local pid = dec24(e, 1)
  if dec24(e, 4) == epochOf(string.format('%d', pid)) then
    redis.call('HINCRBY', P .. 'c:' .. pid, string.byte(e, 8), -1)
  end
end

for _ = 1, count do
  local op, id, name = ARGV[ai], ARGV[ai + 1], ARGV[ai + 2]
  local group, tier, token = tonumber(ARGV[ai + 3]), tonumber(ARGV[ai + 4]), ARGV[ai + 5]
  local n, m = tonumber(ARGV[ai + 6]), tonumber(ARGV[ai + 7])
  local vals = ai + 8
  ai = vals + m
  local keys0 = ki
  ki = ki + n + m
  local status = 0
  local reg = registered[id]
  if reg == nil then
    reg = redis.call('HGET', podn, id)
    registered[id] = reg
  end
  if reg ~= name then
    status = 1
  elseif token ~= '' then
    local lk = id .. '/' .. token
    local ok = leased[lk]
    if ok == nil then
      ok = redis.call('GET', P .. 'lease:' .. id) == token
      leased[lk] = ok
    end
    if not ok then status = 2 end
  end
  if status ~= 0 then
    out[#out + 1] = status
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
  elseif op == 'C' or op == 'X' then
    local e = (epochOf(id) + 1) % 16777216
    redis.call('HSET', P .. 'epoch', id, e)
    epochs[id] = e
    flushCounts(id)
    counts[id] = nil
    redis.call('DEL', P .. 'c:' .. id)
    if op == 'X' then
      redis.call('HDEL', P .. 'pods', name)
      redis.call('HDEL', podn, id)
      registered[id] = false
    end
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = 0
  else
    local pod3 = enc24(tonumber(id))
    local ep3 = enc24(epochOf(id))
    local entry = pod3 .. ep3 .. string.char(group, tier)
    local added, evicted, resolved, removed = 0, 0, 0, 0
    local unknown = {}

    local function add(k)
      -- a new key costs two calls (GET, SET); a new entry on an existing key two (GET, SET of the
      -- longer value); an entry already there two (GET, PEXPIRE)
      local v = redis.call('GET', k)
      if not v then
        if ttl > 0 then
          redis.call('SET', k, entry, 'PX', ttl)
        else
          redis.call('SET', k, entry)
        end
        added = added + 1
        keysCreated = keysCreated + 1
        return
      end
      if findAligned(v, entry) then
        if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
        return
      end
      if findAligned(v, pod3) then
        -- drop this pod's entries of earlier epochs (cleared since)
        local parts = {}
        for i = 1, #v, 8 do
          local e = string.sub(v, i, i + 7)
          if string.sub(e, 1, 3) ~= pod3 or string.sub(e, 4, 6) == ep3 then parts[#parts + 1] = e end
        end
        if #parts * 8 ~= #v then v = table.concat(parts) end
      end
      while #v + 8 > maxBytes do
        uncount(string.sub(v, 1, 8))
        v = string.sub(v, 9)
        evicted = evicted + 1
      end
      v = v .. entry
      if ttl > 0 then redis.call('SET', k, v, 'PX', ttl) else redis.call('SET', k, v, 'KEEPTTL') end
      added = added + 1
    end

    if op == 'S' then
      for i = 0, n - 1 do add(KEYS[keys0 + i]) end
      for j = 0, m - 1 do
        -- one call: written (refreshed) whether new or not; SET ... GET tells which it was
        local k, v = KEYS[keys0 + n + j], ARGV[vals + j]
        local old
        if mttl > 0 then old = redis.call('SET', k, v, 'PX', mttl, 'GET') else old = redis.call('SET', k, v, 'GET') end
        if not old then newMappings = newMappings + 1 end
      end
    elseif op == 'T' then
      for j = 0, n - 1 do
        local mv = redis.call('GET', KEYS[keys0 + j])
        if mv then
          resolved = resolved + 1
          for i = 2, #mv, 8 do add(P .. 'r:' .. string.sub(mv, i, i + 7)) end
        else
          unknown[#unknown + 1] = j
        end
      end
    else -- 'R'
      for j = 0, n - 1 do
        local mv = redis.call('GET', KEYS[keys0 + j])
        if mv then
          resolved = resolved + 1
          for i = 2, #mv, 8 do
            local k = P .. 'r:' .. string.sub(mv, i, i + 7)
            local v = redis.call('GET', k)
            if v then
              local p = findAligned(v, entry)
              if p then
                removed = removed + 1
                if #v == 8 then
                  redis.call('DEL', k)
                  keysDeleted = keysDeleted + 1
                else
                  redis.call('SET', k, string.sub(v, 1, p - 1) .. string.sub(v, p + 8), 'KEEPTTL')
                end
              end
            end
          end
        else
          unknown[#unknown + 1] = j
        end
      end
    end
    local delta = added - removed
    if delta ~= 0 then
      local c = counts[id]
      if not c then
        c = {}
        counts[id] = c
      end
      c[tier] = (c[tier] or 0) + delta
    end
    out[#out + 1] = 0
    if op == 'R' then
      out[#out + 1] = resolved
      out[#out + 1] = removed
      out[#out + 1] = 0
    else
      out[#out + 1] = added
      out[#out + 1] = evicted
      out[#out + 1] = resolved
    end
    out[#out + 1] = #unknown
    for _, u in ipairs(unknown) do out[#out + 1] = u end
  end
end
for id, _ in pairs(counts) do flushCounts(id) end
if keysCreated ~= keysDeleted then redis.call('HINCRBY', P .. 'stats', 'keys', keysCreated - keysDeleted) end
if newMappings > 0 then redis.call('HINCRBY', P .. 'stats', 'engine_keys', newMappings) end
return out
