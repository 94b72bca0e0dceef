"""`BeamGraph`: one sentence's beam search as a graph, from the search's own choices.

    graph = BeamGraph(beam_size=4, alpha=0.6)
    beam_search(..., on_choice=graph.observe)        # eagerly: values each step
    drawn = graph.build(max_decode_length, sequences[0], scores[0], vocab.id_to_piece)

Every candidate the search proposed at a step (`beam_search.OnChoice`) is a
node whose parent is the live hypothesis it extends; candidates with the same
parent and token are one node. Its state says what the search did with it:

    live       kept in the live set (the beam) at that step
    finished   ended by EOS and taken into the finished set
    pruned     proposed and dropped: "beam full" (a non-EOS candidate below
               the k best), "finished set full" (an EOS one scoring below the
               k finished)

and `reason` also marks what happened later: "displaced" (a finished one
pushed out of the finished set by better ones), and for the hypotheses
alive when the search ended "length limit" (cut at max_decode_length) or
"search stopped" (early stopping: none of them could beat the finished set).
The n-best entries are the search's returned sequences, each found by its
tokens from the root: `rank` marks its last node, `winner` the best one's path.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from t2t_revival.decode.beam_search import DEAD, length_penalty
from t2t_revival.special_ids import EOS_ID, PAD_ID

CHOICE_FIELDS = ("log_probs", "parents", "tokens", "live_pick", "live_log_probs",
                 "finished_pick", "finished_scores")
"""The fields of a choice (`OnChoice`) besides its index."""


class BeamGraph:
    """The beam search of one sentence (row 0 of the search), as a graph.

    Args:
        beam_size: k, the search's beam.
        alpha: its length penalty exponent (the scores of finished nodes).
        penalty: the length penalty's kind (`beam_search.length_penalty`).
        eos_id: the end-of-sentence id.
    """

    def __init__(self, beam_size: int, alpha: float, eos_id: int = EOS_ID,
                 penalty: str = "gnmt"):
        self.beam_size, self.alpha, self.eos_id = beam_size, alpha, eos_id
        self.penalty = penalty
        self.choices: list[dict] = []
        """Each step's choice (`OnChoice`), row 0, as numpy arrays."""

    def observe(self, choice: dict) -> None:
        """`beam_search`'s `on_choice`: keeps row 0 of an eager step's choice."""
        record = {name: np.asarray(choice[name])[0] for name in CHOICE_FIELDS}
        record["index"] = int(np.asarray(choice["index"]))
        self.choices.append(record)

    def score(self, log_prob: float, step: int) -> float:
        """A hypothesis ended by EOS at `step`: log_prob / length_penalty(step + 1)."""
        return float(log_prob / float(length_penalty(step + 1, self.alpha, self.penalty)))

    def build(self, max_decode_length: int, sequences: Sequence[Sequence[int]],
              scores: Sequence[float], piece: Callable[[int], str]) -> dict:
        """The graph: {"beam_size", "steps", "stopped", "nodes", "history"}.

        Args:
            max_decode_length: the search's length limit.
            sequences: its returned beams, best first (int ids, EOS then PAD).
            scores: their scores.
            piece: id -> the vocabulary's piece, for the labels.
        """
        nodes = [{"id": 0, "parent": None, "step": -1, "token": None, "piece": "<start>",
                  "log_prob": 0.0, "score": None, "state": "root", "reason": None,
                  "winner": False, "rank": None}]
        children: dict[tuple[int, int], int] = {}
        live: list[int | None] = [0] + [None] * (self.beam_size - 1)
        finished: list[int | None] = [None] * self.beam_size
        history = []
        for choice in self.choices:
            step = choice["index"]
            candidates = [self._candidate(nodes, children, live, choice, c, step, piece)
                          for c in range(len(choice["tokens"]))]
            new_live = [candidates[int(c)] if float(lp) > DEAD else None
                        for c, lp in zip(choice["live_pick"], choice["live_log_probs"])]
            for node in new_live:
                if node is not None:
                    nodes[node].update(state="live", reason=None)
            new_finished: list[int | None] = []
            for pick, score in zip(choice["finished_pick"], choice["finished_scores"]):
                pick = int(pick)
                node = None if float(score) <= DEAD else (
                    finished[pick] if pick < self.beam_size else candidates[pick - self.beam_size])
                if node is not None and nodes[node]["state"] != "finished":
                    nodes[node].update(state="finished", reason=None,
                                       score=self.score(nodes[node]["log_prob"], step))
                new_finished.append(node)
            for node in set(finished) - set(new_finished) - {None}:
                nodes[node]["reason"] = "displaced"
            live, finished = new_live, new_finished
            history.append({
                "step": step,
                "live": [{"node": n, "log_prob": nodes[n]["log_prob"]}
                         for n in live if n is not None],
                "finished": [{"node": n, "score": nodes[n]["score"]}
                             for n in finished if n is not None]})
        steps = len(self.choices)
        alive = [n for n in live if n is not None]
        stopped = ("no live hypotheses" if not alive else
                   "length limit" if steps >= max_decode_length else "early stop")
        for node in alive:
            nodes[node]["reason"] = "length limit" if stopped == "length limit" \
                else "search stopped"
        self._mark_results(nodes, children, sequences, scores)
        return {"beam_size": self.beam_size, "steps": steps, "stopped": stopped,
                "nodes": nodes, "history": history}

    def _candidate(self, nodes, children, live, choice, c: int, step: int, piece):
        """The node of candidate `c` (made pruned, or found), None when dead."""
        parent = live[int(choice["parents"][c])]
        log_prob = float(choice["log_probs"][c])
        if log_prob <= DEAD or parent is None:
            return None
        token = int(choice["tokens"][c])
        key = (parent, token)
        if key not in children:
            children[key] = len(nodes)
            nodes.append({"id": len(nodes), "parent": parent, "step": step, "token": token,
                          "piece": piece(token), "log_prob": log_prob, "score": None,
                          "state": "pruned",
                          "reason": "finished set full" if token == self.eos_id
                          else "beam full",
                          "winner": False, "rank": None})
        return children[key]

    def _mark_results(self, nodes, children, sequences, scores) -> None:
        """`rank` on each returned beam's last node, `winner` on the best's path."""
        for rank, (sequence, score) in enumerate(zip(sequences, scores)):
            if float(score) <= DEAD:
                continue
            node, path = 0, [0]
            for token in (int(t) for t in sequence):
                child = children.get((node, token))
                if child is None and token == PAD_ID:   # the padding after the beam
                    break
                node = child
                if node is None:
                    raise ValueError(f"beam {rank} of the search is not in its graph: "
                                     f"{list(sequence)}")
                path.append(node)
                if token == self.eos_id:
                    break
            if nodes[node]["rank"] is None:
                nodes[node]["rank"] = rank
            if rank == 0:
                for n in path:
                    nodes[n]["winner"] = True
