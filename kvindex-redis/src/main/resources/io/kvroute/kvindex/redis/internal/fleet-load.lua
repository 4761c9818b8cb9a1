-- A replica's in-flight counts and lease. KEYS[1] = P..'replicas'. ARGV: 1 P, 2 replica id,
-- 3 lease ms, 4 mode ('D': these endpoints' absolute counts; 'F': the replica's whole state,
-- endpoints not listed are zero; 'L': the replica leaves), then pairs: endpoint, 'requests tokens',
-- or endpoint, 'c' (a cold request was sent there: it gets the fleet's next cold order, in the
-- order of the pairs) or 'c0' (it left the pool: its cold order is forgotten).
-- Expired replicas are withdrawn first. Returns {1 if the replica was live before the call else 0,
-- replicas withdrawn, live replicas}.
local P, me, lease, mode = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local now = nowMs()
local swept = sweep(P, now)
local present = 0
if redis.call('ZSCORE', KEYS[1], me) then present = 1 end
local mine = P .. 'l:' .. me
if mode == 'L' then
  withdraw(P, me)
  return {present, swept, redis.call('ZCARD', KEYS[1])}
end
if mode == 'F' then
  local listed = {}
  for i = 5, #ARGV, 2 do
    if string.sub(ARGV[i + 1], 1, 1) ~= 'c' then listed[ARGV[i]] = true end
  end
  local all = redis.call('HGETALL', mine)
  for i = 1, #all, 2 do
    if not listed[all[i]] then
      local r, t = parseRT(all[i + 1])
      addTo(P .. 'lr', all[i], -r)
      addTo(P .. 'lt', all[i], -t)
      redis.call('HDEL', mine, all[i])
    end
  end
end
for i = 5, #ARGV, 2 do
  local e, v = ARGV[i], ARGV[i + 1]
  if v == 'c' then
    redis.call('HSET', P .. 'c', e, redis.call('INCR', P .. 'cseq'))
  elseif v == 'c0' then
    redis.call('HDEL', P .. 'c', e)
  else
    local r, t = parseRT(v)
    local r0, t0 = parseRT(redis.call('HGET', mine, e))
    addTo(P .. 'lr', e, r - r0)
    addTo(P .. 'lt', e, t - t0)
    if r == 0 and t == 0 then
      redis.call('HDEL', mine, e)
    else
      redis.call('HSET', mine, e, v)
    end
  end
end
redis.call('ZADD', KEYS[1], now + lease, me)
return {present, swept, redis.call('ZCARD', KEYS[1])}
