-- Pod leases (one writer per pod). KEYS[1] = P..'lease:'..id. ARGV: 1 op (A acquire, R renew,
-- D release), 2 token, 3 TTL ms. Returns 1 if the caller holds the lease afterwards (A, R) or
-- released it (D), else 0.
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == 'A' then
  if not cur or cur == ARGV[2] then
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
    return 1
  end
  return 0
elseif ARGV[1] == 'R' then
  if cur == ARGV[2] then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
    return 1
  end
  return 0
end
if cur == ARGV[2] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
