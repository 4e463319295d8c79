"""The Markdown table of benchmarks/static_intrinsic.sh's results (docs/static_vectors.md,
"Analogies and similarity on PTB, measured"): a row per vector file of RESULTS_DIR/all.json, its
training seconds from RESULTS_DIR/<name>.train.json, Google's analogies by 3CosAdd and 3CosMul
(also split into the semantic sections and those of form: Google's syntactic `gram*` ones, CA8's
morphological ones) with their coverage, each
similarity set's rho with its coverage; then the `a : b :: c : ?` example's 5 best answers.

    python benchmarks/static_intrinsic_table.py [RESULTS_DIR]   # default benchmarks/results/static_intrinsic
"""

import json
import os
import sys

# A vector file's name -> (method, objective, the *.train.json that timed it).
CELLS = {
    "skipgram_negative": ("skip-gram", "negative sampling", "skipgram_negative"),
    "skipgram_hierarchical": ("skip-gram", "hierarchical softmax", "skipgram_hierarchical"),
    "cbow_negative": ("CBOW", "negative sampling", "cbow_negative"),
    "cbow_hierarchical": ("CBOW", "hierarchical softmax", "cbow_hierarchical"),
    "glove": ("GloVe", "weighted least squares", "glove"),
    "elmo.layer0": ("ELMo layer 0", "token embedding (char CNN)", "elmo_layers"),
    "elmo.layer1": ("ELMo layer 1", "mean over contexts", "elmo_layers"),
    "elmo.layer2": ("ELMo layer 2", "mean over contexts", "elmo_layers"),
}


# CA8's morphological sections (reduplication A and AB, semi-affixes prefix and suffix): form, as Google's gram*.
CA8_MORPHOLOGICAL = ("A", "AB", "prefix", "suffix")


def _of_form(section):
    return section.startswith("gram") or section in CA8_MORPHOLOGICAL


def _share(correct, answered):
    return f"{correct / answered:.3f}" if answered else "n/a"


def _split(sections, method):
    """Accuracy over the semantic sections and over those of form (syntactic, morphological)."""
    parts = {True: [0, 0], False: [0, 0]}
    for section in sections:
        part = parts[_of_form(section["section"])]
        part[0] += section["correct"][method]
        part[1] += section["answered"]
    return _share(*parts[False]), _share(*parts[True])


def main(results):
    with open(os.path.join(results, "all.json"), encoding="utf-8") as f:
        everything = json.load(f)
    similarity = [s["name"] for s in everything["sets"]["similarity"]]
    header = ["method", "objective", "training s", "dim", "3CosAdd", "3CosMul",
              "3CosAdd sem / syn", "analogy coverage"]
    header += [f"{name} rho (coverage)" for name in similarity]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    examples = []
    for entry in everything["vectors"]:
        name = os.path.basename(entry["path"]).removesuffix(".txt")
        method, objective, timed = CELLS.get(name, (name, "", name))
        seconds = "n/a"
        train = os.path.join(results, f"{timed}.train.json")
        if os.path.exists(train):
            with open(train, encoding="utf-8") as f:
                seconds = str(json.load(f)["seconds"])
            if timed == "elmo_layers":
                seconds += " (all 3)"
        a = entry["analogies"]
        semantic, syntactic = _split(a["sections"], "3CosAdd")
        row = [method, objective, seconds, str(entry["dim"]),
               f"{a['accuracy']['3CosAdd']:.3f}", f"{a['accuracy']['3CosMul']:.3f}",
               f"{semantic} / {syntactic}",
               f"{a['coverage']:.3f} ({a['answered']:,}/{a['questions']:,})"]
        for set_name in similarity:
            s = entry["similarity"][set_name]
            rho = "n/a" if s["spearman"] is None else f"{s['spearman']:.3f}"
            row.append(f"{rho} ({s['coverage']:.3f}, {s['found']}/{s['pairs']})")
        print("| " + " | ".join(row) + " |")
        found = entry.get("example") or []
        answers = found["error"] if isinstance(found, dict) else ", ".join(
            f"{e['word']} {e['cosine']:.2f}" for e in found)
        examples.append((f"{method}, {objective}", answers))
    a, b, c = everything["example"]
    print(f"\n| method | {a} : {b} :: {c} : ? (3CosAdd, top 5) |\n| --- | --- |")
    for method, answers in examples:
        print(f"| {method} | {answers} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/static_intrinsic")
