-- A replica's in-flight counts and lease. KEYS[1] = P..'replicas'. ARGV: 1 P, 2 replica id,
-- 3 lease ms, 4 mode ('D': these endpoints' absolute counts; 'F': the replica's whole state,
-- endpoints not listed are zero; 'L': the replica leaves), then pairs: endpoint, 'requests tokens'.
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
  for i = 5, #ARGV, 2 do listed[ARGV[i]] = true end
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
  local e = ARGV[i]
  local r, t = parseRT(ARGV[i + 1])
  local r0, t0 = parseRT(redis.call('HGET', mine, e))
  addTo(P .. 'lr', e, r - r0)
  addTo(P .. 'lt', e, t - t0)
  if r == 0 and t == 0 then
    redis.call('HDEL', mine, e)
  else
    redis.call('HSET', mine, e, ARGV[i + 1])
  end
end
redis.call('ZADD', KEYS[1], now + lease, me)
return {present, swept, redis.call('ZCARD', KEYS[1])}
