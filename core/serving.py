"""Serve a WSGI app on loopback in a background thread.

Why: the demo, the end-to-end tests and `hansa eval` run whole federations in one process, with
every site and the gateway a real HTTP server on 127.0.0.1, so the bytes that cross a site
boundary are real requests, not function calls.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server


class _QuietHandler(WSGIRequestHandler):
    """Access lines would drown the demo's output; the apps log their own structured events."""

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class BackgroundServer:
    def __init__(self, app: Callable[..., Any], host: str = "127.0.0.1", port: int = 0) -> None:
        self._server: BaseWSGIServer = make_server(host, port, app, threaded=True, request_handler=_QuietHandler)
        self.host = host
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"wsgi-{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> "BackgroundServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
