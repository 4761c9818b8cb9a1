-- Applies a batch of write operations (events) of one namespace, in order, atomically.
-- KEYS[1] = P..'podn'; then, per op, its keys: request keys (S), engine keys (T), engine or
-- request keys (R, as its flags say), then the engine keys of the mappings S writes.
-- ARGV: 1 P (the namespace prefix '{...}:'), 2 entry TTL ms (0: none), 3 mapping TTL ms,
-- 4 max entries per key, 5 op count; then per op: kind (S store, T tier update, R remove,
-- C clear, X remove pod), pod id, pod name, group, tier code, lease token ('' : not fenced),
-- n, m, flags (S: one byte per mapping, '1' write it, '0' write it only if the request key it
-- names was absent before this call: the client wrote it recently, so only a server that lost it
-- needs it again; R: one byte per key, 'e' an engine key to resolve, 'r' the request key itself,
-- resolved by the client; else ''), then the m mapping values (S).
-- Every key's value is read once per call (MGET of the keys the ops name, then of the request keys
-- the tier updates' and removals' mappings resolve to), changed in a table, and each changed
-- request key written once at the end (SET with the TTL if an entry was added, else KEEPTTL; DEL
-- when its last entry went): a key touched by several ops of the call costs one write.
-- Reply, per op: status (0 ok, 1 pod not registered under this id: re-register, 2 fenced),
-- a, b, c (S/T: added, evicted, resolved; R: resolved, removed, 0), u, then u items: T/R the
-- indexes of unknown engine keys; S one string, a byte per mapping, '1' if it was written and
-- Redis held it already (the client then skips its rewrites for a while), else '0'.
local P = ARGV[1]
local ttl = ARGV[2]
local ttlOn = ttl ~= '0'
local mttl = ARGV[3]
local mttlOn = mttl ~= '0'
local maxBytes = tonumber(ARGV[4]) * 8
local count = tonumber(ARGV[5])
local podn = KEYS[1]
local rP = P .. 'r:'
local sub, find = string.sub, string.find

-- cur[k]: the key's value as this call leaves it so far, false when absent; nil: not read yet
local cur = {}
local function load(list)
  local i, n = 1, #list
  while i <= n do
    local j = math.min(n, i + 999)
    local vs = redis.call('MGET', unpack(list, i, j))
    for x = i, j do cur[list[x]] = vs[x - i + 1] end
    i = j + 1
  end
end
local function val(k)
  local v = cur[k]
  if v == nil then
    v = redis.call('GET', k) or false
    cur[k] = v
  end
  return v
end

-- read ahead: the request keys stores add to, the mappings tier updates and removals resolve,
-- then the request keys those mappings name
do
  local want, maps = {}, {}
  local ai, ki = 6, 2
  for _ = 1, count do
    local op = ARGV[ai]
    local n, m = tonumber(ARGV[ai + 6]), tonumber(ARGV[ai + 7])
    if op == 'S' then
      for i = ki, ki + n - 1 do
        local k = KEYS[i]
        if cur[k] == nil then cur[k] = false; want[#want + 1] = k end
      end
    elseif op == 'T' or op == 'R' then
      local flags = ARGV[ai + 8]
      for i = ki, ki + n - 1 do
        local k = KEYS[i]
        if cur[k] == nil then
          cur[k] = false
          want[#want + 1] = k
          if op == 'T' or string.byte(flags, i - ki + 1) ~= 114 then maps[#maps + 1] = k end -- 'r'
        end
      end
    end
    ai = ai + 9 + m
    ki = ki + n + m
  end
  load(want)
  want = {}
  for _, ek in ipairs(maps) do
    local mv = cur[ek]
    if mv then
      for i = 2, #mv, 8 do
        local k = rP .. sub(mv, i, i + 7)
        if cur[k] == nil then cur[k] = false; want[#want + 1] = k end
      end
    end
  end
  load(want)
end

local epochs = {}
local function epochOf(id)
  local e = epochs[id]
  if not e then
    e = tonumber(redis.call('HGET', P .. 'epoch', id) or '0')
    epochs[id] = e
  end
  return e
end
local newMappings = 0
-- request keys touched, in the order first touched, and st[k]: 1 if it existed at the first
-- touch, + 2 if changed (its value is written back), + 4 if refreshed (an entry added or found)
local st, order = {}, {}
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

-- the op being applied (set per op): its entry, the pod's id and epoch bytes, what it added
local entry, pod3, ep3, added, evicted
local function add(k)
  local v = cur[k]
  if v == nil then
    v = redis.call('GET', k) or false
    cur[k] = v
  end
  local s = st[k]
  if not s then
    s = v and 1 or 0
    order[#order + 1] = k
  end
  if not v then
    cur[k] = entry
    st[k] = s % 2 + 6
    added = added + 1
    return
  end
  if findAligned(v, entry) then
    if s < 4 then st[k] = s + 4 end
    return
  end
  if findAligned(v, pod3) then
    -- drop this pod's entries of earlier epochs (cleared since)
    local parts = {}
    for i = 1, #v, 8 do
      local e = sub(v, i, i + 7)
      if sub(e, 1, 3) ~= pod3 or sub(e, 4, 6) == ep3 then parts[#parts + 1] = e end
    end
    if #parts * 8 ~= #v then v = table.concat(parts) end
  end
  while #v + 8 > maxBytes do
    uncount(sub(v, 1, 8))
    v = sub(v, 9)
    evicted = evicted + 1
  end
  cur[k] = v .. entry
  st[k] = s % 2 + 6
  added = added + 1
end

for _ = 1, count do
  local op, id, name = ARGV[ai], ARGV[ai + 1], ARGV[ai + 2]
  local group, tier, token = tonumber(ARGV[ai + 3]), tonumber(ARGV[ai + 4]), ARGV[ai + 5]
  local n, m, flags = tonumber(ARGV[ai + 6]), tonumber(ARGV[ai + 7]), ARGV[ai + 8]
  local vals = ai + 9
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
    pod3 = enc24(tonumber(id))
    ep3 = enc24(epochOf(id))
    entry = pod3 .. ep3 .. string.char(group, tier)
    added, evicted = 0, 0
    local resolved, removed = 0, 0
    local unknown, held = {}, nil

    if op == 'S' then
      for i = 0, n - 1 do add(KEYS[keys0 + i]) end
      held = {}
      for j = 0, m - 1 do
        local k, v = KEYS[keys0 + n + j], ARGV[vals + j]
        held[j + 1] = '0'
        -- '0': fresh at the client; written only if its (last) request key was absent
        if string.byte(flags, j + 1) ~= 48 or (st[rP .. sub(v, -8)] or 0) % 2 == 0 then
          -- one call: written (refreshed) whether new or not; SET ... GET tells which it was
          local old
          if mttlOn then old = redis.call('SET', k, v, 'PX', mttl, 'GET') else old = redis.call('SET', k, v, 'GET') end
          if old then held[j + 1] = '1' else newMappings = newMappings + 1 end
          cur[k] = v
        end
      end
    elseif op == 'T' then
      for j = 0, n - 1 do
        local mv = val(KEYS[keys0 + j])
        if mv then
          resolved = resolved + 1
          for i = 2, #mv, 8 do add(rP .. sub(mv, i, i + 7)) end
        else
          unknown[#unknown + 1] = j
        end
      end
    else -- 'R'
      for j = 0, n - 1 do
        local kj = KEYS[keys0 + j]
        local direct = string.byte(flags, j + 1) == 114 -- 'r'
        local mv = direct or val(kj)
        if mv then
          resolved = resolved + 1
          for i = direct and 1 or 2, direct and 1 or #mv, 8 do
            local k = direct and kj or rP .. sub(mv, i, i + 7)
            local v = val(k)
            if v then
              local p = findAligned(v, entry)
              if p then
                removed = removed + 1
                local sk = st[k]
                if not sk then
                  sk = 1
                  order[#order + 1] = k
                end
                if sk % 4 < 2 then st[k] = sk + 2 end
                if #v == 8 then cur[k] = false else cur[k] = sub(v, 1, p - 1) .. sub(v, p + 8) end
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
    if held then
      out[#out + 1] = 1
      out[#out + 1] = table.concat(held)
    else
      out[#out + 1] = #unknown
      for _, u in ipairs(unknown) do out[#out + 1] = u end
    end
  end
end
-- write back each changed request key once
local keysCreated, keysDeleted = 0, 0
for _, k in ipairs(order) do
  local v, s = cur[k], st[k]
  if s % 4 >= 2 then -- changed
    if not v then
      if s % 2 == 1 then
        redis.call('DEL', k)
        keysDeleted = keysDeleted + 1
      end
    else
      if s % 2 == 0 then keysCreated = keysCreated + 1 end
      if s >= 4 and ttlOn then
        redis.call('SET', k, v, 'PX', ttl)
      else
        redis.call('SET', k, v, 'KEEPTTL')
      end
    end
  elseif s >= 4 and ttlOn and v then
    redis.call('PEXPIRE', k, ttl)
  end
end
for id, _ in pairs(counts) do flushCounts(id) end
if keysCreated ~= keysDeleted then redis.call('HINCRBY', P .. 'stats', 'keys', keysCreated - keysDeleted) end
if newMappings > 0 then redis.call('HINCRBY', P .. 'stats', 'engine_keys', newMappings) end
return out
