# Runs vLLM's reference P2pNccl proxy (its own handle_request and registration listener) and
# kvroute proxy --connector p2pnccl against the same two capture "instances", registered over ZMQ
# with the message P2pNcclEngine.ping sends, and compares what the instances received.
import asyncio, json, os, re, sys, threading, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "stubs"))
sys.path.insert(0, os.path.dirname(__file__))
import aiohttp
from aiohttp import web
import msgpack, zmq

CASES = [
    ("/v1/completions", {"model": "m", "prompt": "Hello", "max_tokens": 20}),
    ("/v1/completions", {"model": "m", "prompt": [1, 2, 3], "max_tokens": 20, "stream": True,
                         "stream_options": {"include_usage": True}, "temperature": 0.0, "seed": 7}),
    ("/v1/completions", {"prompt": "x", "min_tokens": 4, "max_tokens": 16, "n": 1, "ignore_eos": True}),
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                              "max_completion_tokens": 50, "stream": True}),
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                              "max_tokens": 50, "logprobs": True}),
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
]
P_HTTP, D_HTTP = 28101, 28102
P_KV, D_KV = "127.0.0.1:21001", "127.0.0.1:22001"

legs = []

async def capture(req):
    body = await req.json()
    legs.append({"port": req.url.port, "path": req.path, "id": req.headers.get("X-Request-Id"),
                 "auth": req.headers.get("Authorization"), "body": body})
    if body.get("stream"):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await resp.write(b'data: {"choices":[{"text":"a"}]}\n\ndata: [DONE]\n\n')
        await resp.write_eof()
        return resp
    return web.json_response({"choices": [{"text": "a", "finish_reason": "length"}]})

def register(endpoint, stop):
    ctx = zmq.Context()
    socks = []
    for kind, http, kv in (("P", P_HTTP, P_KV), ("D", D_HTTP, D_KV)):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt_string(zmq.IDENTITY, kv)
        s.connect(endpoint)
        socks.append((s, {"type": kind, "http_address": f"127.0.0.1:{http}", "zmq_address": kv}))
    while not stop.is_set():
        for s, data in socks:
            s.send(msgpack.dumps(data))
        time.sleep(0.2)

async def main(mode, target):
    app = web.Application()
    app.router.add_post("/v1/completions", capture)
    app.router.add_post("/v1/chat/completions", capture)
    runner = web.AppRunner(app)
    await runner.setup()
    for port in (P_HTTP, D_HTTP):
        await web.TCPSite(runner, "127.0.0.1", port).start()
    stop = threading.Event()
    if mode == "reference":
        os.environ["OPENAI_API_KEY"] = "t"
        import disagg_proxy_p2p_nccl_xpyd as ref
        ref.start_service_discovery("127.0.0.1", 30099)
        threading.Thread(target=register, args=("tcp://127.0.0.1:30099", stop), daemon=True).start()
        while len(ref.prefill_instances) < 1 or len(ref.decode_instances) < 1:
            await asyncio.sleep(0.05)
        for path, body in CASES:
            ref.request.path = path
            ref.request.body = body
            resp = await ref.handle_request()
            async for _ in resp.gen:
                pass
    else:
        threading.Thread(target=register, args=(target, stop), daemon=True).start()
        async with aiohttp.ClientSession() as s:
            while True:  # 503 until both instances registered
                async with s.post("http://127.0.0.1:10001/v1/completions",
                                  json={"model": "m", "prompt": "probe"}) as r:
                    await r.read()
                    if r.status == 200:
                        break
                await asyncio.sleep(0.1)
            legs.clear()
            for path, body in CASES:
                async with s.post("http://127.0.0.1:10001" + path, json=body,
                                  headers={"Authorization": "Bearer t"}) as r:
                    await r.read()
                    assert r.status == 200, (r.status, path)
    stop.set()
    await runner.cleanup()
    json.dump(legs, open(f"/tmp/ref/{mode}.json", "w"), indent=1)
    print(mode, len(legs), "legs")

asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
