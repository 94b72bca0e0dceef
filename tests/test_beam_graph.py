"""T2T Insights' beam graph is the search's own history: on the toy
alphabets of tests/test_beam_search.py, every hypothesis the search held
after each step (as its `on_step` observer sees the state) is a node of the
graph with its log-prob or score, and the graph's winner is what the search
returns (eagerly and compiled)."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_revival.decode.beam_search import DEAD, beam_search
from t2t_revival.insights.beam_graph import BeamGraph
from test_beam_search import EOS, make_cache, make_step, strip


def _tables(seed, vocab=6):
    rng = np.random.default_rng(seed)
    tables = rng.normal(size=(1, vocab, vocab, vocab)) * 2.0
    tables[..., 0] = -30.0   # PAD is never proposed
    return tables


def _path(nodes, node):
    tokens = []
    while nodes[node]["parent"] is not None:
        tokens.append(nodes[node]["token"])
        node = nodes[node]["parent"]
    return tokens[::-1]


def _search(tables, beam, alpha, max_len, **guides):
    states, graph = [], BeamGraph(beam, alpha)

    def on_step(state):
        states.append({"index": int(state["index"]), **{
            name: np.asarray(state[name])[0] for name in
            ("live_seqs", "live_log_probs", "finished_seqs", "finished_scores")}})

    seqs, scores = beam_search(make_step(tables, max_len), make_cache([0], max_len), 1, beam,
                               alpha, max_len, on_step=on_step, on_choice=graph.observe,
                               **guides)
    seqs, scores = np.asarray(seqs)[0], np.asarray(scores)[0]
    drawn = graph.build(max_len, seqs, scores, str)
    return drawn, states, seqs, scores


@pytest.mark.parametrize("seed,beam,alpha,max_len", [(0, 3, 0.6, 6), (1, 2, 0.0, 5),
                                                     (2, 4, 1.0, 7), (3, 3, 0.6, 3)])
def test_every_hypothesis_the_search_kept_is_in_the_graph_with_its_score(seed, beam, alpha,
                                                                          max_len):
    tables = _tables(seed)
    drawn, states, seqs, scores = _search(tables, beam, alpha, max_len)
    nodes = drawn["nodes"]
    by_path = {tuple(_path(nodes, n["id"])): n for n in nodes}
    assert len(by_path) == len(nodes)   # one node a hypothesis
    checked = 0
    for state in states[1:]:   # the state before step t: what step t - 1 kept
        t = int(state["index"])
        for seq, log_prob in zip(state["live_seqs"], state["live_log_probs"]):
            if log_prob > DEAD:
                node = by_path[tuple(seq[:t])]
                assert node["step"] == t - 1 and node["log_prob"] == pytest.approx(log_prob)
                assert node["state"] == "live" or node["reason"] in ("length limit",
                                                                     "search stopped")
                checked += 1
        for seq, score in zip(state["finished_seqs"], state["finished_scores"]):
            if score > DEAD:
                node = by_path[tuple(strip(seq))]
                assert node["state"] == "finished" and node["score"] == pytest.approx(score)
                checked += 1
    assert checked > beam
    # Each step's history is the search's live and finished sets.
    assert len(drawn["history"]) == drawn["steps"] == len(states)
    for entry in drawn["history"]:
        assert 0 < len(entry["live"]) + len(entry["finished"]) <= 2 * beam
    # The winner is the search's output, eagerly and compiled.
    winner = [n for n in nodes if n["rank"] == 0][0]
    assert _path(nodes, winner["id"]) == strip(seqs[0])
    assert {n["id"] for n in nodes if n["winner"]} == {0, *_ancestors(nodes, winner["id"])}
    if winner["state"] == "finished":
        assert winner["score"] == pytest.approx(scores[0])
    compiled = tf.function(lambda c: beam_search(make_step(tables, max_len), c, 1, beam, alpha,
                                                 max_len))(make_cache([0], max_len))
    assert strip(np.asarray(compiled[0])[0, 0]) == _path(nodes, winner["id"])
    ranks = sorted(n["rank"] for n in nodes if n["rank"] is not None)
    assert ranks == list(range(len(ranks))) and len(ranks) >= 1
    # Every pruned node says why, consistently with its token.
    for n in nodes:
        if n["state"] == "pruned":
            assert n["reason"] == ("finished set full" if n["token"] == EOS else "beam full")


def _ancestors(nodes, node):
    found = []
    while node is not None and node != 0:
        found.append(node)
        node = nodes[node]["parent"]
    return found


def test_a_search_cut_at_the_length_limit_says_so():
    tables = _tables(4)
    tables[..., EOS] = -30.0   # nothing ever ends
    drawn, _, seqs, _ = _search(tables, 2, 0.6, 4)
    assert drawn["stopped"] == "length limit" and drawn["steps"] == 4
    last = [n for n in drawn["nodes"] if n["step"] == 3 and n["state"] == "live"]
    assert last and all(n["reason"] == "length limit" for n in last)
    assert [n for n in drawn["nodes"] if n["rank"] == 0][0]["step"] == 3


def test_greedy_and_prefixed_searches_are_drawn_too():
    tables = _tables(5)
    drawn, _, seqs, _ = _search(tables, 1, 0.6, 5)   # beam 1: greedy search
    chain = [n for n in drawn["nodes"] if n["winner"]]
    assert [n["token"] for n in chain[1:]] == strip(seqs[0])
    assert all(n["state"] in ("root", "live", "finished") for n in drawn["nodes"])
    prefix = np.array([[4, 3]], np.int32)
    drawn, states, seqs, _ = _search(tables, 3, 0.6, 6, prefix=prefix)
    first = [n for n in drawn["nodes"] if n["step"] == 0]
    assert {n["token"] for n in first} == {4} and strip(seqs[0])[:2] == [4, 3]
    constraints = (np.array([[2, 5]], np.int32), np.array([[True, False]]))
    drawn, states, seqs, _ = _search(tables, 3, 0.6, 6, constraints=constraints)
    winner = [n for n in drawn["nodes"] if n["rank"] == 0][0]
    path = _path(drawn["nodes"], winner["id"])
    assert path == strip(seqs[0]) and any(path[i:i + 2] == [2, 5] for i in range(len(path)))
