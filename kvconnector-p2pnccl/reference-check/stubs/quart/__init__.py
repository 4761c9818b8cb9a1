# A stand-in for quart, enough to import the reference proxy and call its handler directly.
class _Request:
    path = "/v1/completions"
    body = None

    async def get_json(self):
        return self.body


request = _Request()


class _Response:
    def __init__(self, gen):
        self.gen = gen
        self.timeout = 0


async def make_response(gen):
    return _Response(gen)


class Quart:
    def __init__(self, name):
        pass

    def route(self, *a, **k):
        return lambda f: f

    def run(self, **k):
        pass
