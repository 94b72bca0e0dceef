"""`insights_app`: T2T Insights' Flask application, the page and its JSON API.

    GET  /                      the page (static/index.html)
    GET  /static/<file>         its script and style, from the package
    GET  /api/runs              the runs served, their languages and defaults
    POST /api/translate         a query (JSON; docs/insights.md has its fields)
    GET  /api/list_models/      tensor2tensor's names for the runs and languages,
    GET  /api/language_list/    as its Insights server answered them
    GET  /debug?source=&id=     tensor2tensor's query URL (sl, tl accepted)

What the API cannot answer is a 4xx with `{"error": "one line"}` (a bad
sentence or setting 400, an unknown run or path 404, a body over
`MAX_REQUEST_BYTES` 413); a bug is a 500 whose traceback goes to the server's
log. Either way the server goes on serving.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from typing import Mapping

from t2t_revival.errors import UserError
from t2t_revival.insights.insights_configuration import InsightsConfiguration
from t2t_revival.insights.query_form import QueryForm
from t2t_revival.insights.run_insights import RunInsights

STATIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
"""The page's files, in the package."""

MAX_REQUEST_BYTES = 1 << 20
"""A request body's largest size."""


class RequestError(UserError):
    """A request the API refuses: its one line and HTTP status."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def insights_app(runs: Mapping[str, RunInsights], configuration: InsightsConfiguration,
                 static_dir: str = STATIC_DIR, log: logging.Logger | None = None):
    """The Flask app serving `runs` ({label: RunInsights}) and the page in `static_dir`."""
    import flask
    from werkzeug.exceptions import HTTPException

    app = flask.Flask("t2t_insights", static_folder=static_dir, static_url_path="/static")
    app.config.update(MAX_CONTENT_LENGTH=MAX_REQUEST_BYTES, SEND_FILE_MAX_AGE_DEFAULT=0)
    app.json.sort_keys = False
    app.url_map.merge_slashes = False   # "//x" is no page, not a redirect to one
    log = log or logging.getLogger("t2t_insights")

    def run_of(label) -> RunInsights:
        if not isinstance(label, str) or label not in runs:
            raise RequestError(f"no run labelled {label!r}; the runs are "
                               f"{', '.join(sorted(runs))}", 404)
        return runs[label]

    @app.errorhandler(UserError)
    def refused(error: UserError):
        status = getattr(error, "status", 400)
        return flask.jsonify(error=" ".join(str(error).split())), status

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException):
        message = {404: f"no such page or file: {flask.request.path}",
                   405: f"{flask.request.method} is not served at {flask.request.path}",
                   413: f"the request is over {MAX_REQUEST_BYTES} bytes"}.get(
                       error.code, error.description)
        return flask.jsonify(error=message), error.code

    @app.errorhandler(Exception)
    def bug(error: Exception):
        log.exception("T2T Insights: the query failed")
        return flask.jsonify(error=f"internal error ({type(error).__name__}: {error}); "
                                   "the server log has its traceback"), 500

    @app.get("/")
    def page():
        return flask.send_from_directory(static_dir, "index.html")

    @app.get("/api/runs")
    def list_runs():
        return flask.jsonify(runs=[run.describe() for run in runs.values()])

    @app.post("/api/translate")
    def translate():
        body = _json_body(flask.request.get_data(cache=False))
        run = run_of(body.get("run"))
        return flask.jsonify(run.query(_text(body, "sentence"), QueryForm(
            beam_size=_text(body, "beam_size"), alpha=_text(body, "alpha"),
            prefix=_text(body, "prefix"), constraints=_phrases(body.get("constraints")),
            decode_hparams=_text(body, "decode_hparams"))))

    def language(code: str) -> dict:
        return {"code": code, "name": configuration.language_name(code)}

    @app.get("/api/list_models/")
    def list_models():
        return flask.jsonify(configuration=[
            {"id": label, "source_language": language(run.source_language),
             "target_language": language(run.target_language)} for label, run in runs.items()])

    @app.get("/api/language_list/")
    def language_list():
        codes = sorted({c for run in runs.values()
                        for c in (run.source_language, run.target_language) if c})
        return flask.jsonify(language=[language(c) for c in codes])

    @app.get("/debug")
    def debug():
        args = _strict_query(flask.request.query_string)
        return flask.jsonify(run_of(args.get("id", next(iter(runs)))).query(
            args.get("source", "")))

    return app


def _json_body(raw: bytes) -> dict:
    """A request's JSON object, a RequestError when it is not UTF-8 JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RequestError(f"the request is not valid UTF-8 (byte {raw[e.start]:#04x} at "
                           f"offset {e.start}); send the sentence as UTF-8 text") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as e:
        raise RequestError(f"the request is not JSON ({e.msg} at character {e.pos})") from None
    if not isinstance(body, dict):
        raise RequestError("the request must be a JSON object: {\"run\": ..., \"sentence\": ...}")
    return body


def _text(body: dict, name: str) -> str:
    """Field `name` as text ("" when absent); a number is taken as its text."""
    value = body.get(name, "")
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise RequestError(f"field {name!r} must be text. Received: {json.dumps(value)[:60]}")
    return str(value)


def _phrases(value) -> tuple[str, ...]:
    """The constraints field: a list of phrases (blank ones dropped)."""
    if value in (None, "", []):
        return ()
    if isinstance(value, str):
        value = value.splitlines()
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise RequestError("field 'constraints' must be a list of phrases (text). "
                           f"Received: {json.dumps(value)[:60]}")
    return tuple(p for p in value if p.strip())


def _strict_query(query_string: bytes) -> dict[str, str]:
    """A URL's query arguments, a RequestError when one is not UTF-8."""
    args = {}
    for pair in query_string.split(b"&"):
        name, _, value = pair.partition(b"=")
        try:
            args[urllib.parse.unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8")] = \
                urllib.parse.unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            raise RequestError("the URL's query is not valid UTF-8; percent-encode the "
                               "sentence's UTF-8 bytes") from None
    return args
