import json, re
ref = json.load(open("/tmp/ref/reference.json"))
kvr = json.load(open("/tmp/ref/kvroute.json"))
ID = re.compile(r"___prefill_addr_127\.0\.0\.1:21001___decode_addr_127\.0\.0\.1:22001_[0-9a-f]{32}$")
def pairs(legs):
    return [(legs[i], legs[i + 1]) for i in range(0, len(legs), 2)]
def deviate(p):
    p = dict(p)
    p["stream"] = False
    if "max_completion_tokens" in p:
        p["max_completion_tokens"] = 1
    for k in ("stream_options", "min_tokens", "min_completion_tokens"):
        p.pop(k, None)
    return p
ok = True
for n, ((rp, rd), (kp, kd)) in enumerate(zip(pairs(ref), pairs(kvr))):
    checks = {
        "prefill leg to P, decode leg to D (both)": rp["port"] == kp["port"] == 28101 and rd["port"] == kd["port"] == 28102,
        "same paths": (rp["path"], rd["path"]) == (kp["path"], kd["path"]),
        "id format (both)": all(ID.match(x["id"]) for x in (rp, rd, kp, kd)),
        "one id per request (both)": rp["id"] == rd["id"] and kp["id"] == kd["id"],
        "decode body identical": rd["body"] == kd["body"],
        "decode key order identical": list(rd["body"]) == list(kd["body"]),
        "prefill = reference + documented deviations": kp["body"] == deviate(rp["body"]),
        "authorization": rp["auth"] == kp["auth"] == "Bearer t",
    }
    for k, v in checks.items():
        ok &= v
        if not v:
            print("case", n, "FAILED", k, rp, kp, rd, kd)
    diff = {k: (rp["body"].get(k, "<absent>"), kp["body"].get(k, "<absent>"))
            for k in set(rp["body"]) | set(kp["body"]) if rp["body"].get(k, "<absent>") != kp["body"].get(k, "<absent>")}
    print("case", n, rp["path"], "prefill differs (reference, kvroute):", diff)
print("ALL OK" if ok else "MISMATCH", len(ref), len(kvr))
