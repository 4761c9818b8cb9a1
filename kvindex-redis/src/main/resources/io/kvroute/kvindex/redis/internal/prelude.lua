-- Shared helpers (prepended to every kvroute index script).
-- An entry is 8 bytes: pod id (u24) | pod epoch (u24) | KV-cache group (u8) | tier code (u8).
local function enc24(x)
  return string.char(math.floor(x / 65536) % 256, math.floor(x / 256) % 256, x % 256)
end
local function dec24(s, i)
  local a, b, c = string.byte(s, i, i + 2)
  return a * 65536 + b * 256 + c
end
-- 1-based start of an occurrence of pat at an entry boundary, or nil.
local function findAligned(v, pat)
  local init = 1
  while true do
    local p = string.find(v, pat, init, true)
    if not p then return nil end
    if (p - 1) % 8 == 0 then return p end
    init = p + 1
  end
end
