-- STORE / TIER / REMOVE / CLEAR for one pod.
-- KEYS[1] = P..'podn'; KEYS[2..1+n] = request keys (STORE) or engine keys (TIER, REMOVE);
-- KEYS[2+n..1+n+m] = engine keys written by STORE.
-- ARGV: 1 op (S, T, R, C, X), 2 P (the namespace prefix, '{ns}:'), 3 pod id, 4 pod name,
-- 5 group, 6 tier code, 7 entry TTL ms (0: none), 8 mapping TTL ms, 9 max entries per key,
-- 10 lease token ('' : not fenced), 11 n, 12 m, 13.. the m mapping values (STORE).
-- Returns {status, a, b, c, unknown engine-key indexes...}; status 0 ok, 1 pod not registered
-- under this id (re-register), 2 fenced (the lease is someone else's).
local op, P, id = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HGET', KEYS[1], id) ~= ARGV[4] then return {1} end
if ARGV[10] ~= '' and redis.call('GET', P .. 'lease:' .. id) ~= ARGV[10] then return {2} end
local epoch = tonumber(redis.call('HGET', P .. 'epoch', id) or '0')
if op == 'C' or op == 'X' then
  redis.call('HSET', P .. 'epoch', id, (epoch + 1) % 16777216)
  redis.call('DEL', P .. 'c:' .. id)
  if op == 'X' then
    redis.call('HDEL', P .. 'pods', ARGV[4])
    redis.call('HDEL', KEYS[1], id)
  end
  return {0}
end
local pod3 = enc24(tonumber(id))
local ep3 = enc24(epoch)
local tier = tonumber(ARGV[6])
local entry = pod3 .. ep3 .. string.char(tonumber(ARGV[5]), tier)
local ttl = tonumber(ARGV[7])
local maxBytes = tonumber(ARGV[9]) * 8
local n, m = tonumber(ARGV[11]), tonumber(ARGV[12])
local added, evicted, created, resolved = 0, 0, 0, 0
local unknown = {}

local function uncount(e)
  local pid = dec24(e, 1)
  local ep = tonumber(redis.call('HGET', P .. 'epoch', pid) or '0')
  if dec24(e, 4) == ep then
    redis.call('HINCRBY', P .. 'c:' .. pid, string.byte(e, 8), -1)
  end
end

local function add(k)
  local v = redis.call('GET', k)
  if not v then
    if ttl > 0 then redis.call('SET', k, entry, 'PX', ttl) else redis.call('SET', k, entry) end
    added = added + 1
    created = created + 1
    return
  end
  if findAligned(v, entry) then
    if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
    return
  end
  local changed = false
  if findAligned(v, pod3) then
    -- drop this pod's entries of earlier epochs (cleared since)
    local parts = {}
    for i = 1, #v, 8 do
      local e = string.sub(v, i, i + 7)
      if string.sub(e, 1, 3) ~= pod3 or string.sub(e, 4, 6) == ep3 then parts[#parts + 1] = e end
    end
    if #parts * 8 ~= #v then
      v = table.concat(parts)
      changed = true
    end
  end
  while #v + 8 > maxBytes do
    uncount(string.sub(v, 1, 8))
    v = string.sub(v, 9)
    evicted = evicted + 1
    changed = true
  end
  if changed then
    v = v .. entry
    if ttl > 0 then redis.call('SET', k, v, 'PX', ttl) else redis.call('SET', k, v, 'KEEPTTL') end
  else
    redis.call('APPEND', k, entry)
    if ttl > 0 then redis.call('PEXPIRE', k, ttl) end
  end
  added = added + 1
end

if op == 'S' then
  for i = 1, n do add(KEYS[1 + i]) end
  local mttl = tonumber(ARGV[8])
  local newMappings = 0
  for j = 1, m do
    local old
    if mttl > 0 then
      old = redis.call('SET', KEYS[1 + n + j], ARGV[12 + j], 'PX', mttl, 'GET')
    else
      old = redis.call('SET', KEYS[1 + n + j], ARGV[12 + j], 'GET')
    end
    if not old then newMappings = newMappings + 1 end
  end
  if newMappings > 0 then redis.call('HINCRBY', P .. 'stats', 'engine_keys', newMappings) end
elseif op == 'T' then
  for j = 1, n do
    local mv = redis.call('GET', KEYS[1 + j])
    if mv then
      resolved = resolved + 1
      for i = 2, #mv, 8 do add(P .. 'r:' .. string.sub(mv, i, i + 7)) end
    else
      unknown[#unknown + 1] = j - 1
    end
  end
else -- 'R'
  local removed, deleted = 0, 0
  for j = 1, n do
    local mv = redis.call('GET', KEYS[1 + j])
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
              deleted = deleted + 1
            else
              redis.call('SET', k, string.sub(v, 1, p - 1) .. string.sub(v, p + 8), 'KEEPTTL')
            end
          end
        end
      end
    else
      unknown[#unknown + 1] = j - 1
    end
  end
  if removed > 0 then redis.call('HINCRBY', P .. 'c:' .. id, tier, -removed) end
  if deleted > 0 then redis.call('HINCRBY', P .. 'stats', 'keys', -deleted) end
  local out = {0, resolved, removed, 0}
  for _, u in ipairs(unknown) do out[#out + 1] = u end
  return out
end
if added > 0 then redis.call('HINCRBY', P .. 'c:' .. id, tier, added) end
if created > 0 then redis.call('HINCRBY', P .. 'stats', 'keys', created) end
local out = {0, added, evicted, resolved}
for _, u in ipairs(unknown) do out[#out + 1] = u end
return out
