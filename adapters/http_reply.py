"""One reply from a local OpenAI-compatible server (the model gateway, a project's fault proxy)."""

import logging
from http.server import BaseHTTPRequestHandler

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())


def send_reply(handler: BaseHTTPRequestHandler, status: int, content_type: str, payload: bytes) -> None:
    """Status, headers and body, one reply per connection; a client gone before it is no error."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(payload)
    except (BrokenPipeError, ConnectionResetError):
        log.debug("client went away before the reply")
