-- Refreshes the TTL of request keys a lookup matched. ARGV[1] = TTL ms.
for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[1]) end
return #KEYS
