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

import http.client
import json
import socket
import urllib.error
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
        timeout: seconds to wait for the answer.
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
    """The body of TF Serving's answer to `POST .../models/NAME:predict` of `request_body`."""
    if not server.startswith(("http://", "https://")):
        raise ServingError("--server must be an http(s) URL such as http://localhost:8501. "
                           f"Received: server={server!r}")
    path = f"/v1/models/{model_name}" + (f"/versions/{version}" if version else "") + ":predict"
    url = server.rstrip("/") + path
    body = json.dumps(request_body).encode("utf-8")
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = response.read()
    except urllib.error.HTTPError as e:
        detail = e.read().decode("utf-8", "replace")
        try:
            detail = json.loads(detail).get("error", detail)
        except (ValueError, AttributeError):
            pass
        raise ServingError(f"the server answered HTTP {e.code}: {detail[:300]}; check "
                           f"--model_name and that the model is loaded. Received: url={url!r}"
                           ) from None
    except http.client.HTTPException as e:  # not HTTP (BadStatusLine), a cut body (IncompleteRead)
        raise ServingError(f"the server's answer is not a complete HTTP response "
                           f"({type(e).__name__}: {str(e)[:100]}); check that --server is "
                           f"TF Serving's REST port (8501 by default, not gRPC's 8500). "
                           f"Received: url={url!r}") from None
    except (urllib.error.URLError, socket.timeout, ConnectionError) as e:
        reason = getattr(e, "reason", e)
        raise ServingError(f"cannot reach the TF Serving REST API ({reason}); start the "
                           f"server (docs/serving.md) or fix --server. Received: url={url!r}"
                           ) from None
    return answer
