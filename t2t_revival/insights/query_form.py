"""`QueryForm`: a T2T Insights query's settings as the page sends them, and
`query_settings`, which resolves them through the same checks as t2t-decoder's
--decode_hparams."""

from __future__ import annotations

import dataclasses
import re

from t2t_revival.errors import UserError
from t2t_revival.settings.decode_hparams import DecodeHParams, parse_decode_hparams


@dataclasses.dataclass(frozen=True)
class QueryForm:
    """A query's settings as the page sends them: text, "" for the run's own.

    beam_size, alpha: single decode hparams; prefix: the output's start;
    constraints: phrases the output must contain; decode_hparams: any other
    decode hparams, `k=v,...`, as t2t-decoder's --decode_hparams.
    """

    beam_size: str = ""
    alpha: str = ""
    prefix: str = ""
    constraints: tuple[str, ...] = ()
    decode_hparams: str = ""


def query_settings(hparams, defaults: str, form: QueryForm) -> DecodeHParams:
    """The decode settings of a query: the run's hparams, then `defaults`
    (the server's --decode_hparams), then the form's, each through
    `parse_decode_hparams` and `DecodeHParams` as on the command line.
    Over-long inputs are refused (long_inputs=refuse) unless set."""
    texts = [defaults, form.decode_hparams]
    for name in ("beam_size", "alpha"):
        value = getattr(form, name).strip()
        if value:
            if re.search(r"[,=]", value):
                raise UserError(f"decode hparam {name!r} takes one value. Received: "
                                f"{name}={value!r}")
            texts.append(f"{name}={value}")
    overrides = {"long_inputs": "refuse"}
    for text in texts:
        if text.strip():
            overrides.update(parse_decode_hparams(text))
    if form.prefix.strip():
        overrides["prefix"] = True
    if form.constraints:
        overrides["constraints"] = True
    settings = DecodeHParams.from_hparams(hparams, overrides)
    if settings.sampling:
        raise UserError("T2T Insights draws beam search; drop sampling=true (t2t-decoder "
                        "samples). Received: sampling=True")
    return dataclasses.replace(settings, return_beams=True, write_beam_scores=False)
