-- Registers a pod name (idempotent). KEYS[1] = P..'pods' (name -> id).
-- ARGV: 1 P, 2 name, 3 preferred id (a hash of the name), 4 id space, 5 max pods.
-- Returns {id, epoch}; id -1 when max pods are registered.
local P = ARGV[1]
local id = redis.call('HGET', KEYS[1], ARGV[2])
if not id then
  if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[5]) then return {-1, 0} end
  local space = tonumber(ARGV[4])
  local c = tonumber(ARGV[3]) % space
  while redis.call('HEXISTS', P .. 'podn', c) == 1 do c = (c + 1) % space end
  id = string.format('%d', c)
  redis.call('HSET', KEYS[1], ARGV[2], id)
  redis.call('HSET', P .. 'podn', id, ARGV[2])
end
return {tonumber(id), tonumber(redis.call('HGET', P .. 'epoch', id) or '0')}
