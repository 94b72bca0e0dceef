"""Query a TF Serving REST endpoint serving an export (standard library only).

    query_server("http://localhost:8501", "t2t", ["A man is riding a bike."])
    -> [("Ein Mann fährt Fahrrad.", -0.41)]

Sends `POST {server}/v1/models/{model_name}:predict` with
`{"signature_name": "serving_default", "instances": [sentence, ...]}` and reads
the row-format answer `{"predictions": [{"outputs": str, "scores": float}, ...]}`.

    query_nbest("http://localhost:8501", "t2t", ["A dog runs."], 2)
    -> [[("Ein Hund rennt.", -0.52), ("Ein Hund läuft.", -0.61)]]

calls the export's `translate_nbest` signature in the columnar form (its
`num_hypotheses` is a scalar): `{"signature_name": "translate_nbest", "inputs":
{"sentences": [...], "num_hypotheses": n}}`, answered with
`{"outputs": {"outputs": [[str, ...], ...], "scores": [[float, ...], ...]}}`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.parse
import urllib.request
from typing import Sequence

from t2t_revival.errors import UserError


class ServingError(UserError):
    """The server cannot be reached, or answered with an error or an odd body."""


def query_server(server: str, model_name: str, sentences: Sequence[str],
                 signature_name: str = "serving_default", version: int | None = None,
                 timeout: float = 60.0) -> list[tuple[str, float]]:
    """(translation, score) for each sentence, in order.

    Args:
        server: the REST base URL, e.g. `http://localhost:8501`.
        model_name: TF Serving's --model_name (MODEL_NAME in the docker image).
        sentences: source sentences.
        signature_name: the signature to call (strings in, `outputs`/`scores` out).
        version: a model version; default the newest the server loaded.
        timeout: seconds for the whole request, connecting to the last byte of
            the answer (not for each read: a server that trickles its answer is
            given up at the deadline).
    """
    if not sentences:
        return []
    answer = _predict(server, model_name, {"signature_name": signature_name,
                                           "instances": list(sentences)}, version, timeout)
    try:
        predictions = json.loads(answer)["predictions"]
        results = [(str(p["outputs"]), float(p["scores"])) for p in predictions]
    except (ValueError, KeyError, TypeError) as e:
        raise ServingError(f"the server's answer is not a TF Serving predict response "
                           f"with outputs and scores ({type(e).__name__}: {e}). "
                           f"Received: {answer[:200]!r}") from None
    if len(results) != len(sentences):
        raise ServingError(f"the server returned {len(results)} predictions for "
                           f"{len(sentences)} sentences. Received: {answer[:200]!r}")
    return results


def query_nbest(server: str, model_name: str, sentences: Sequence[str], num_hypotheses: int,
                version: int | None = None, timeout: float = 60.0
                ) -> list[list[tuple[str, float]]]:
    """The n best (translation, score) of each sentence, best first, from the
    export's `translate_nbest` signature (arguments as `query_server`'s)."""
    if not sentences:
        return []
    answer = _predict(server, model_name, {"signature_name": "translate_nbest", "inputs": {
        "sentences": list(sentences), "num_hypotheses": int(num_hypotheses)}}, version, timeout)
    try:
        outputs = json.loads(answer)["outputs"]
        results = [[(str(text), float(score)) for text, score in zip(texts, scores)]
                   for texts, scores in zip(outputs["outputs"], outputs["scores"])]
    except (ValueError, KeyError, TypeError) as e:
        raise ServingError(f"the server's answer is not a TF Serving columnar predict "
                           f"response with outputs and scores ({type(e).__name__}: {e}); "
                           f"does the export have the translate_nbest signature (exports "
                           f"before it do not)? Received: {answer[:200]!r}") from None
    if len(results) != len(sentences) or any(len(r) != num_hypotheses for r in results):
        raise ServingError(f"the server returned {len(results)} n-best lists for "
                           f"{len(sentences)} sentences of {num_hypotheses} hypotheses. "
                           f"Received: {answer[:200]!r}")
    return results


def _predict(server: str, model_name: str, request_body: dict, version: int | None,
             timeout: float) -> bytes:
    """The body of TF Serving's answer to `POST .../models/NAME:predict` of
    `request_body`, within `timeout` seconds for the whole request (connect,
    send, headers and body): a server that trickles its answer a byte at a
    time is given up at the deadline, not waited on read after read."""
    parts = _server_url(server)
    if not model_name or any(c.isspace() or not c.isprintable() for c in model_name):
        what = "holds a space or a control character" if model_name else "is empty"
        raise ServingError(f"--model_name {what}: give the served model's name (TF "
                           f"Serving's MODEL_NAME, e.g. t2t). Received: model_name={model_name!r}")
    # Non-ASCII is sent percent-encoded (an HTTP request's path is ASCII).
    suffix = (f"/v1/models/{urllib.parse.quote(model_name, safe='')}"
              + (f"/versions/{version}" if version else "") + ":predict")
    path = urllib.parse.quote(parts.path.rstrip("/"), safe="/%") + suffix
    url = server.rstrip("/") + suffix
    body = json.dumps(request_body).encode("utf-8")
    connection, path = _connection(parts, path, timeout)
    expired = threading.Event()

    def cut() -> None:   # at the deadline: what the request waits on ends at once
        expired.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):   # (the plain socket's, also under TLS)
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    deadline = threading.Timer(timeout, cut)
    deadline.daemon = True
    deadline.start()
    try:
        connection.connect()
        if expired.is_set():   # (connected just as the deadline passed)
            raise TimeoutError
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        status = response.status
        try:
            answer = response.read()
        except (http.client.HTTPException, OSError):
            if status < 400 or expired.is_set():
                raise
            answer = None   # an error whose body is cut: the status says enough
    except (http.client.HTTPException, OSError) as e:
        if expired.is_set() or isinstance(e, TimeoutError):
            raise ServingError(f"no complete answer from the server within --timeout="
                               f"{timeout:g} seconds (the whole request); raise --timeout, "
                               f"lower --batch_size, or check the server. Received: url={url!r}"
                               ) from None
        if isinstance(e, http.client.HTTPException):   # not HTTP, or a cut answer
            raise ServingError(f"the server's answer is not a complete HTTP response "
                               f"({type(e).__name__}: {str(e)[:100]}); check that --server "
                               f"is TF Serving's REST port (8501 by default, not gRPC's "
                               f"8500). Received: url={url!r}") from None
        reason = e.strerror or e
        raise ServingError(f"cannot reach the TF Serving REST API ({reason}); start the "
                           f"server (docs/serving.md) or fix --server. Received: url={url!r}"
                           ) from None
    finally:
        deadline.cancel()
        connection.close()
    if status >= 300:
        detail = "its body cut short" if answer is None else answer.decode("utf-8", "replace")
        try:
            detail = json.loads(detail).get("error", detail)
        except (ValueError, AttributeError):
            pass
        raise ServingError(f"the server answered HTTP {status}: {str(detail)[:300]}; check "
                           f"--model_name and that the model is loaded. Received: url={url!r}")
    return answer


def _connection(parts: urllib.parse.SplitResult, path: str, timeout: float
                ) -> tuple[http.client.HTTPConnection, str]:
    """The connection a request of `path` on the server `parts` goes through,
    and the request target: straight to the server, or through the proxy that
    `http_proxy`/`https_proxy` name (unless `no_proxy` lists the host), as
    urllib would (an absolute URL to an http proxy; a CONNECT tunnel for https)."""
    https = parts.scheme == "https"
    kind = http.client.HTTPSConnection if https else http.client.HTTPConnection
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname):
        return kind(parts.hostname, parts.port, timeout=timeout), path
    proxy_parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if https:
        connection = kind(proxy_parts.hostname, proxy_parts.port, timeout=timeout)
        connection.set_tunnel(parts.hostname, parts.port)
        return connection, path
    connection = http.client.HTTPConnection(proxy_parts.hostname, proxy_parts.port,
                                            timeout=timeout)
    return connection, f"http://{parts.netloc}{path}"


def _server_url(server: str) -> urllib.parse.SplitResult:
    """`--server` split, or a ServingError saying what is wrong with it."""
    if not server.startswith(("http://", "https://")):
        raise ServingError("--server must be an http(s) URL such as http://localhost:8501. "
                           f"Received: server={server!r}")
    if any(c.isspace() or not c.isprintable() for c in server):
        raise ServingError("--server holds a space or a control character, which no URL "
                           "does (percent-encode it, %20). Received: "
                           f"server={server!r}")
    try:
        parts = urllib.parse.urlsplit(server)
    except ValueError as e:   # "Invalid IPv6 URL"
        raise ServingError(f"--server is not a valid URL ({e}); e.g. http://localhost:8501 "
                           f"or http://[::1]:8501. Received: server={server!r}") from None
    try:
        port = parts.port
    except ValueError:   # "Port out of range 0-65535", "Port could not be cast ..."
        port = parts.netloc.rpartition(":")[2]
    if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
        what = "is out of range: ports are 1 to 65535" if str(port).isascii() and \
            str(port).isdecimal() else "is not a number"
        raise ServingError(f"the port of --server, {port}, {what} (TF Serving's REST port "
                           f"is 8501 by default). Received: server={server!r}")
    if not parts.hostname:
        raise ServingError("--server names no host; e.g. http://localhost:8501. "
                           f"Received: server={server!r}")
    if parts.query or parts.fragment:
        raise ServingError("--server is the REST base URL, without a query or fragment; "
                           f"e.g. http://localhost:8501. Received: server={server!r}")
    return parts
