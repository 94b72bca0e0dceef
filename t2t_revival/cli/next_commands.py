"""`next_commands`: what to run after a training run, as t2t-trainer prints it last.

No flags here (unlike the CLI modules), so tests and the README's checks
import it freely.
"""

from __future__ import annotations

import os

from t2t_revival import registry
from t2t_revival.run_dir.file_names import AVERAGED_DIR, CHECKPOINT_PREFIX


def next_commands(problem_name: str, output_dir: str, data_dir: str, step: int) -> list[str]:
    """The commands after a run of `problem_name` that reached `step`: average
    the last 5 checkpoints, decode the test set with the average (the decoder
    prints its score), score the file again on its own (t2t-bleu, or
    t2t-parse-eval for a parsing problem), and export the same average as a
    SavedModel. For the README's main job, the README's workflow block."""
    problem = registry.problems.get(problem_name)()
    source, target = problem.source_target_files("test", data_dir)
    averaged = os.path.join(output_dir, AVERAGED_DIR, f"{CHECKPOINT_PREFIX}-{step}")
    # translate_ende_* -> "de": the suffix of the translation file and the
    # Moses tokenizer's language of the tokenized BLEU (default "de").
    name = problem_name.split("_")
    language = name[1][2:] if name[0] == "translate" and len(name[1]) == 4 else ""
    hypotheses = f"test.hyp.{language}" if language else "test.hyp"
    language_flag = f" --language={language}" if language not in ("", "de") else ""
    commands = [
        f"t2t-avg-checkpoints --output_dir={output_dir} --num_last_checkpoints=5",
        f"t2t-decoder --output_dir={output_dir} --checkpoint_path={averaged} "
        f"--decode_from_file={source} --decode_reference={target} "
        f"--decode_to_file={hypotheses}{language_flag}"]
    if problem.eval_metric == "evalb":
        commands.append(f"t2t-parse-eval --gold={problem.gold_tree_file('test', data_dir)} "
                        f"--predicted={hypotheses}.trees")
    else:
        commands.append(f"t2t-bleu --translation={hypotheses} --reference={target}"
                        f"{language_flag}")
    commands.append(f"t2t-exporter --output_dir={output_dir} --checkpoint_path={averaged}")
    return commands
