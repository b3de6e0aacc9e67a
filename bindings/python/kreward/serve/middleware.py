"""ASGI middleware of the server: the body size limit and the bearer token.

Both sit below Starlette's routing so that a refused request costs nothing:
a Content-Length over the limit is answered 413 before one byte of the
body is read (a body without one, chunked, is counted as it arrives and cut
off at the limit by app.body_of). The token is compared in constant time
(hmac.compare_digest): the time to refuse says nothing about how much of a
guess was right."""
import hmac
import json

OPEN_PATHS = ("/health",)  # load balancers probe it without credentials


async def _send_json(send, status, body, headers=()):
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": data})


def _error(message):
    return {"error": message, "detail": message}


class LimitBody:
    def __init__(self, app, max_bytes):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    return await _send_json(send, 400, _error("malformed Content-Length"))
                if length > self.max_bytes:
                    return await _send_json(send, 413, _error(
                        f"request body of {length} bytes; the limit is {self.max_bytes}"))
        await self.app(scope, receive, send)


class BearerToken:
    def __init__(self, app, token):
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope, receive, send):
        if self.token is None or scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
        scheme, _, credential = given.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(credential.strip(), self.token):
            return await _send_json(send, 401, _error("a bearer token is required (Authorization: "
                                                      "Bearer TOKEN)"),
                                    [(b"www-authenticate", b'Bearer realm="kreward"')])
        return await self.app(scope, receive, send)
