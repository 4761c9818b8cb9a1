-- Shared helpers of the fleet scripts (prepended to each). P = the fleet's prefix '{...}:'.
-- Keys: P..'replicas' (sorted set: replica id -> lease expiry, ms of server time), P..'lr' and
-- P..'lt' (hashes: endpoint -> requests / tokens in flight, summed over live replicas),
-- P..'l:'..replica (hash: endpoint -> 'requests tokens' of that replica), P..'s:'..<8 bytes>
-- (speculative entries of a checkpoint request key), P..'a:'..<8 bytes> (routing-memory entries of
-- a checkpoint prefix hash, the same format), P..'c' (hash: endpoint -> the fleet's order of the
-- last cold request sent there) and P..'cseq' (that order's counter). Every key carries the
-- fleet's hash tag.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Adds d to field f of hash h, deleting the field when it reaches 0 (bounded by live endpoints).
local function addTo(h, f, d)
  if d ~= 0 then
    local v = redis.call('HINCRBY', h, f, d)
    if v <= 0 then redis.call('HDEL', h, f) end
  end
end
local function parseRT(v)
  if not v then return 0, 0 end
  local r, t = string.match(v, '^(%d+) (%d+)$')
  return tonumber(r) or 0, tonumber(t) or 0
end
-- Withdraws replica d's counts from the sums and forgets it.
local function withdraw(P, d)
  local h = P .. 'l:' .. d
  local all = redis.call('HGETALL', h)
  for i = 1, #all, 2 do
    local r, t = parseRT(all[i + 1])
    addTo(P .. 'lr', all[i], -r)
    addTo(P .. 'lt', all[i], -t)
  end
  redis.call('DEL', h)
  redis.call('ZREM', P .. 'replicas', d)
end
-- Withdraws the replicas whose lease expired (at most 64 per call); returns how many.
local function sweep(P, now)
  local dead = redis.call('ZRANGEBYSCORE', P .. 'replicas', '-inf', now, 'LIMIT', 0, 64)
  for _, d in ipairs(dead) do withdraw(P, d) end
  return #dead
end
