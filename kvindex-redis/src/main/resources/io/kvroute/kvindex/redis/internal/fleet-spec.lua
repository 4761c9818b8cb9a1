-- Speculative entries. KEYS = checkpoint keys (P..'s:'..<request key>). ARGV: 1 TTL ms, 2 max
-- entries per key, then per key the new entry's identity (20 bytes: endpoint hash 8, tail position
-- 4, tail key 8). A stored entry is 26 bytes: its expiry (ms of server time, 6 bytes big-endian),
-- then its identity. Expired entries and an older entry of the same identity are dropped, the
-- oldest beyond the maximum; the key lives one TTL after its last write. Returns the keys written.
local ttl, max = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = nowMs()
local exp = now + ttl
local e6 = string.char(math.floor(exp / 1099511627776) % 256, math.floor(exp / 4294967296) % 256,
  math.floor(exp / 16777216) % 256, math.floor(exp / 65536) % 256, math.floor(exp / 256) % 256,
  exp % 256)
local function expiry(e)
  local a, b, c, d, f, g = string.byte(e, 1, 6)
  return ((((a * 256 + b) * 256 + c) * 256 + d) * 256 + f) * 256 + g
end
for i = 1, #KEYS do
  local id = ARGV[2 + i]
  local v = redis.call('GET', KEYS[i])
  local parts = {}
  if v then
    for j = 1, #v - 25, 26 do
      local e = string.sub(v, j, j + 25)
      if expiry(e) > now and string.sub(e, 7) ~= id then parts[#parts + 1] = e end
    end
  end
  parts[#parts + 1] = e6 .. id
  local from = math.max(1, #parts - max + 1)
  redis.call('SET', KEYS[i], table.concat(parts, '', from), 'PX', ttl)
end
return #KEYS
