"""T2T Insights' server for the tests: the app of `insights_app` over some
runs, served by werkzeug's threaded server on a free localhost port in a
thread of the test process (`serving`), and a JSON client (`call`)."""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.error
import urllib.request


@contextlib.contextmanager
def serving(runs, configuration=None):
    """Yield the base URL (http://127.0.0.1:PORT) of the app serving `runs`
    ({label: RunInsights}); the server is shut down after."""
    from werkzeug.serving import make_server

    from t2t_revival.insights.insights_app import insights_app
    from t2t_revival.insights.insights_configuration import InsightsConfiguration

    app = insights_app(runs, configuration or InsightsConfiguration(()))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def call(url: str, body=None, raw: bytes | None = None, timeout: float = 120):
    """(HTTP status, decoded JSON) of a GET (no body) or a POST of `body` as
    JSON (or of the bytes `raw`)."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
