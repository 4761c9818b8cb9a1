-- One scheduling cycle's fleet view. KEYS[1] = P..'replicas'; KEYS[2..] = the request's
-- checkpoint keys (P..'s:'..key), then its routing-memory checkpoint keys (P..'a:'..hash), in
-- order. ARGV: 1 P, 2 the reading replica's id, 3 endpoint count e, 4..3+e the endpoints. Expired
-- replicas are withdrawn first, so no view counts a replica past its lease. Returns {server time
-- ms, requests of the endpoints (sums over live replicas), tokens of the endpoints, the reading
-- replica's own 'requests tokens' of the endpoints as Redis holds them, the endpoints' cold orders
-- (nil if none), then the value of each checkpoint key (nil if none)}.
local P = ARGV[1]
local n = tonumber(ARGV[3])
local now = nowMs()
sweep(P, now)
local out = {now}
if n > 0 then
  local eps = {}
  for i = 1, n do eps[i] = ARGV[3 + i] end
  out[2] = redis.call('HMGET', P .. 'lr', unpack(eps))
  out[3] = redis.call('HMGET', P .. 'lt', unpack(eps))
  out[4] = redis.call('HMGET', P .. 'l:' .. ARGV[2], unpack(eps))
  out[5] = redis.call('HMGET', P .. 'c', unpack(eps))
else
  out[2] = {}
  out[3] = {}
  out[4] = {}
  out[5] = {}
end
for i = 2, #KEYS do out[#out + 1] = redis.call('GET', KEYS[i]) end
return out
