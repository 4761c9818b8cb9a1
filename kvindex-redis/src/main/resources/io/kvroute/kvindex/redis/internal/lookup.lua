-- One round trip for a whole prompt. KEYS[1] = P..'epoch'; KEYS[2..] = the prompt's request keys
-- in order. ARGV = the candidate pods' ids. Returns {epochs of ARGV, value 1, value 2, ...},
-- stopping at the first request key nobody holds (no pod can match past it).
local out = {}
if #ARGV > 0 then out[1] = redis.call('HMGET', KEYS[1], unpack(ARGV)) else out[1] = {} end
for i = 2, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if not v then break end
  out[i] = v
end
return out
