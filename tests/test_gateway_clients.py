"""The pipelines' OpenAI clients reach the gateway on 127.0.0.1 directly, on the process's one TLS context
(adapters/gateway/clients.py)."""

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from adapters.gateway.clients import gateway_async_http_client, gateway_http_client
from adapters.gateway.server import loopback_tls


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def local_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_a_proxy_in_the_environment_never_routes_a_call_to_the_gateway(local_server, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there: a proxied call would fail
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with gateway_http_client(5.0) as client:
        assert client.get(local_server).text == "ok"

    async def fetch() -> str:
        async with gateway_async_http_client(5.0) as client:
            return (await client.get(local_server)).text

    assert asyncio.run(fetch()) == "ok"


def test_every_client_shares_the_process_tls_context_instead_of_loading_the_ca_bundle_again():
    for client in (gateway_http_client(5.0), gateway_async_http_client(5.0)):
        assert client._transport._pool._ssl_context is loopback_tls()  # httpx keeps the context it was given
