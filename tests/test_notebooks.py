"""Every notebook under notebooks/ executes headless, and its key cells show real results.

The kernel is this interpreter (``sys.executable``): a kernelspec written to a temporary
Jupyter data folder (put first on ``JUPYTER_PATH``) points at it, so a fresh clone tested
with ``.venv/bin/python -m pytest`` runs the notebooks in the same environment, whatever
kernels the user has installed. Execution time is measured, printed (``pytest -s``) and
never asserted. After the notebook's own cells, one probe cell reads the notebook's
variables, so the checks compare what the notebook computed with independent sources
(the committed example questions' gold answers, the committed ablation results, the
H-bond engines run here). The notebooks are committed with their outputs for readers;
those are cleared before execution and never checked.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL_NAME = "misi-agent-test"
CELL_TIMEOUT_S = 600  # a guard against a hung kernel, not a speed requirement


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory) -> str:
    """A kernelspec for this interpreter, first on JUPYTER_PATH for the whole module."""
    data_dir = tmp_path_factory.mktemp("jupyter")
    spec_dir = data_dir / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "misi-agent (test)", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(data_dir))
    mp.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    yield KERNEL_NAME
    mp.undo()


def execute(path: Path, kernel: str, probe: str | None = None) -> tuple[nbformat.NotebookNode, dict | None, float]:
    """Run every cell of ``path`` (outputs cleared first) in a fresh kernel started in the
    notebook's folder; then, in the same kernel, ``probe`` (code printing one JSON line).
    Returns the executed notebook, the probe's JSON and the wall time of the notebook's cells."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    client = NotebookClient(nb, kernel_name=kernel, timeout=CELL_TIMEOUT_S, allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    probed = None
    with client.setup_kernel():
        t0 = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        seconds = time.perf_counter() - t0
        if probe is not None:
            cell = nbformat.v4.new_code_cell(probe)
            nb.cells.append(cell)
            try:
                client.execute_cell(cell, len(nb.cells) - 1)
            finally:
                nb.cells.pop()
            text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
            probed = json.loads(text.strip().splitlines()[-1])
    return nb, probed, seconds


def tagged(nb: nbformat.NotebookNode, tag: str) -> nbformat.NotebookNode:
    cells = [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"expected one cell tagged {tag!r}, found {len(cells)}"
    return cells[0]


def mimetypes(cell: nbformat.NotebookNode) -> set[str]:
    return {m for o in cell.outputs for m in o.get("data", {})}


def text_of(cell: nbformat.NotebookNode) -> str:
    parts = []
    for o in cell.outputs:
        parts.append(o.get("text", ""))
        for m in ("text/markdown", "text/plain"):
            if m in o.get("data", {}):
                parts.append(o["data"][m])
    return "\n".join(parts)


def test_there_are_notebooks():
    assert {"explore_complex.ipynb", "hbond_rules.ipynb", "image_grounding.ipynb"} <= {p.name for p in NOTEBOOKS}


PROBE = """
import json
print(json.dumps({
    "python": sys.executable,
    "complex": [cx.pdb_id, cx.ligand_code, cx.ligand.array_length(), len(cx.residues())],
    "visible": visible_atoms,
    "n_scene_atoms": len(scenes[0]),
    "chimerax": format_pocket_ligand(chimerax_bonds),
    "n_chimerax": len(chimerax_bonds),
    "plip": format_pocket_ligand(plip.hbonds),
    "n_plip": len(plip.hbonds),
    "openbabel_loaded": any("openbabel" in m.lower() for m in sys.modules),
    "answers": {qid: [q.task, r.answer, r.error, [c["name"] for c in r.tool_calls], r.trace.turns]
                for qid, (q, r) in agent_results.items()},
    "ablation": ablation_summary,
}))
"""


def check_explore_complex(nb: nbformat.NotebookNode, got: dict) -> None:
    """explore_complex.ipynb: each section's output, against independent sources."""
    # The kernel is this interpreter, and PLIP ran outside it.
    assert Path(got["python"]).resolve() == Path(sys.executable).resolve()
    assert got["openbabel_loaded"] is False

    # 1. the complex, with a 2D depiction.
    assert got["complex"][:2] == ["7ush", "82V"] and got["complex"][2] > 10 and got["complex"][3] > 10
    assert "image/png" in mimetypes(tagged(nb, "complex"))

    # 2. six views, every scene atom visible in each, drawn as a figure.
    assert sorted(got["visible"]) == sorted(["front", "left", "top", "back", "right", "bottom"])
    assert all(v == got["n_scene_atoms"] > 0 for v in got["visible"].values())
    assert "image/jpeg" in mimetypes(tagged(nb, "views"))

    # 3. H-bonds: a non-empty table with rows from both engines; the ChimeraX-compatible
    # engine reproduces the committed T9 example's gold answer (made by the generator).
    gold = {json.loads(line)["id"]: json.loads(line) for line in
            (ROOT / "examples" / "questions.jsonl").read_text().splitlines() if line.strip()}
    assert got["n_chimerax"] > 0 and got["n_plip"] > 0
    assert got["chimerax"] == gold["pocket_ligand_interaction-7ush-0"]["answer"]
    table = text_of(tagged(nb, "hbonds"))
    assert "ChimeraX-compatible" in table and "PLIP 3.0.1" in table
    assert table.count("| ChimeraX-compatible |") == got["n_chimerax"]
    assert table.count("| PLIP 3.0.1 |") == got["n_plip"]

    # 4. one question of every task, each answered exactly as its gold answer, with tool calls.
    tasks = {q["task"] for q in gold.values()}
    assert len(tasks) == 9
    assert set(got["answers"]) == set(gold)
    for qid, (task, answer, error, calls, turns) in got["answers"].items():
        assert task == gold[qid]["task"]
        assert error is None, (qid, error)
        assert answer == gold[qid]["answer"], (qid, answer, gold[qid]["answer"])
        assert calls and turns >= 2, (qid, calls, turns)
    assert "9/9 exactly right" in text_of(tagged(nb, "agent"))
    assert "image/jpeg" in mimetypes(tagged(nb, "question-images"))
    traces = text_of(tagged(nb, "traces"))
    assert "question docking-7loe-0" in traces and "question pocket_ligand_interaction-7ush-0" in traces
    assert "tool pocket_hbonds" in traces and gold["pocket_ligand_interaction-7ush-0"]["answer"] in traces

    # 5. the ablation plot, with the committed per-arm averages.
    results = json.loads((ROOT / "eval" / "results" / "ablation" / "tiny" / "results.json").read_text())
    for set_name, s in results["sets"].items():
        for arm in s["arms"].values():
            if arm["status"]["status"] == "ok":
                assert got["ablation"][arm["label"]][set_name] == round(arm["scores"]["average"]["composite"], 2)
            else:
                assert arm["label"] not in got["ablation"]
    assert "image/png" in mimetypes(tagged(nb, "ablation"))


PROBE_RULES = """
import json
print(json.dumps({
    "rules": list(RULES),
    "pairs": {pid: {rule: sorted(map(list, found)) for rule, found in p.items()} for pid, p in pairs.items()},
    "ligands": {pid: cx.ligand_code for pid, cx in complexes.items()},
    "summary": summary,
    "reasons": {title: dict(counts) for title, counts in reason_counts.items()},
    "openbabel_loaded": any("openbabel" in m.lower() for m in sys.modules),
}))
"""


def check_hbond_rules(nb: nbformat.NotebookNode, got: dict) -> None:
    """hbond_rules.ipynb: the rules' pair sets against the engines run here, every
    disagreement given a reason, the tables and the plot shown."""
    import csv

    from misi_agent.agent.knowledge_variants import distance_hbonds
    from misi_agent.agent.store import EMBEDDED_DIR
    from misi_agent.structure import load_complex
    from misi_agent.tools.hbonds import find_hbonds

    assert got["openbabel_loaded"] is False
    relaxed, strict, plip, dist = got["rules"]
    with (EMBEDDED_DIR / "manifest.csv").open() as fh:
        manifest = list(csv.DictReader(fh))
    assert sorted(got["pairs"]) == sorted(r["pdb_id"] for r in manifest)

    def keys(found):
        return sorted([b.chain, int(b.residue_number), b.insertion_code, b.residue_name, b.protein_atom, b.ligand_atom]
                      for b in found)

    for row in manifest:
        cx = load_complex(EMBEDDED_DIR / row["file"], row["ligand_ccd"] or None)
        p = got["pairs"][cx.pdb_id]
        assert got["ligands"][cx.pdb_id] == cx.ligand_code
        assert p[relaxed] == sorted(map(list, {tuple(k) for k in keys(find_hbonds(cx))}))
        assert p[strict] == sorted(map(list, {tuple(k) for k in keys(find_hbonds(cx, mode="strict"))}))
        assert p[dist] == sorted(map(list, {tuple(k) for k in keys(distance_hbonds(cx))}))

    n = len(manifest)
    assert got["summary"][relaxed] == {"pairs": sum(len(p[relaxed]) for p in got["pairs"].values()),
                                       "t9_exact": n, "mean_jaccard": 1.0}
    assert got["summary"][plip]["pairs"] > 0
    for rule in (strict, plip, dist):
        assert got["summary"][rule]["t9_exact"] == sum(p[rule] == p[relaxed] for p in got["pairs"].values())

    def differ(a, b):
        return sum(len({tuple(x) for x in p[a]} - {tuple(x) for x in p[b]}) for p in got["pairs"].values())

    reasons = got["reasons"]
    assert sum(reasons["only benchmark, vs PLIP"].values()) == differ(relaxed, plip) > 0
    assert sum(reasons["only PLIP"].values()) == differ(plip, relaxed) > 0
    assert sum(reasons["only distance rule"].values()) == differ(dist, relaxed) > 0
    assert sum(reasons["only benchmark, vs distance rule"].values()) == differ(relaxed, dist)
    assert not [r for c in reasons.values() for r in c if r.startswith("unexplained")]

    assert "| 7USH | 82V |" in text_of(tagged(nb, "rules"))
    assert "image/png" in mimetypes(tagged(nb, "distances"))
    assert text_of(tagged(nb, "reasons")).count("| reason | pairs |") == 4
    assert text_of(tagged(nb, "focus")).count("| 1AKU |") >= 5


PROBE_IMAGES = """
import json
print(json.dumps({
    "qid": qid,
    "recon": recon,
    "rebuilt": rebuilt.tolist(),
    "rebuilt_is_ligand": rec_lig.tolist(),
    "reads": reads,
    "label_rows": label_rows,
    "naming": naming,
    "renderer_rows": renderer_rows,
    "answers": {k: [q.task, r.answer, r.error, r.trace.grounding_used, s.composite, s.exact]
                for k, (q, r, s) in image_results.items()},
    "n_exact": n_exact,
}))
"""


def check_image_grounding(nb: nbformat.NotebookNode, got: dict) -> None:
    """image_grounding.ipynb: the rebuilt atoms, the labels read and the image-only answers, each against the truth
    recomputed here (the generator's atom record, the examples' gold answers scored by the benchmark scorer)."""
    import numpy as np
    from scipy.spatial import cKDTree

    from misi_agent.bench.question import read_question
    from misi_agent.bench.scoring import score_item

    # 2. the reconstruction against the true front scene, recomputed from the rebuilt atoms the notebook made.
    truth = np.load(ROOT / "examples" / "items" / got["qid"] / "atoms.npz")
    true_xyz, true_lig = truth["front/coords"], truth["front/is_ligand"].astype(bool)
    rebuilt = np.asarray(got["rebuilt"], float)
    rebuilt_lig = np.asarray(got["rebuilt_is_ligand"], bool)
    lig = float(np.mean(cKDTree(rebuilt[rebuilt_lig]).query(true_xyz[true_lig])[0] <= 1.0))
    every = float(np.mean(cKDTree(rebuilt).query(true_xyz)[0] <= 1.0))
    recon = got["recon"]
    assert recon["true atoms"] == len(true_xyz) and recon["rebuilt atoms"] == len(rebuilt)
    assert recon["ligand atoms recovered (≤ 1 Å)"] == round(lig, 3) and lig >= 0.9, lig
    assert recon["all atoms recovered (≤ 1 Å)"] == round(every, 3) and every >= 0.8, every
    assert recon["RMSD of rebuilt atoms within 2 Å (Å)"] <= 0.8
    assert 0.9 <= recon["scale ratio (rebuilt / true distance)"] <= 1.1
    assert "image/jpeg" in mimetypes(tagged(nb, "views"))
    assert "image/jpeg" in mimetypes(tagged(nb, "reconstruction"))

    # 3. labels: the counts of reads naming a residue or ligand atom shown, recounted against the truth.
    names = truth["front/atom_name"].astype(str)
    true_residues = {f"{r.split('|')[3]} {r.split('|')[1]}" for r in truth["front/residue"].astype(str)[~true_lig]}
    read_right = 0
    for view, n_res, n_res_right, n_lig, n_lig_right in got["label_rows"]:
        reads = got["reads"][view]
        assert n_res == len(reads["residue"]) and n_lig == len(reads["ligand"])
        assert n_res_right == sum(x in true_residues for x in reads["residue"])
        assert n_lig_right == sum(x in set(names[true_lig]) for x in reads["ligand"])
        read_right += n_res_right
    assert len(got["label_rows"]) == 6
    assert read_right >= 0.8 * sum(row[1] for row in got["label_rows"]) > 0
    naming = got["naming"]
    assert naming["residues named right (name and number)"] >= 0.8 * naming["residues named"] > 0
    assert naming["ligand N and O named right"] >= 0.6 * naming["ligand N and O named"] > 0
    assert "image/jpeg" in mimetypes(tagged(nb, "labels"))

    # 3b. the same complex drawn by PyMOL, rebuilt and read the same way: a row per renderer, raster's the same
    # figures as above.
    raster, pymol = got["renderer_rows"]
    assert raster[0] == "raster" and pymol[0] == "PyMOL"
    assert raster[1] == len(rebuilt) and float(raster[2]) == round(lig, 2) and float(raster[3]) == round(every, 2)
    assert pymol[1] > 100 and float(pymol[3]) >= 0.5 and 0.85 <= float(pymol[4]) <= 1.15, pymol
    assert int(pymol[6].split(" of ")[0]) > 0
    assert "image/jpeg" in mimetypes(tagged(nb, "pymol"))

    # 4. one question of every task answered from the pictures alone, scored again here.
    gold_ids = [json.loads(line)["id"] for line in (ROOT / "examples" / "questions.jsonl").read_text().splitlines()
                if line.strip()]
    assert sorted(got["answers"]) == sorted(gold_ids)
    by_task = {}
    for qid, (task, answer, error, used, composite, exact) in got["answers"].items():
        q = read_question(ROOT / "examples" / "items" / qid / "question.json")
        s = score_item(q, answer)
        assert task == q.task and error is None, (qid, error)
        assert set(used.values()) == {"images"}, (qid, used)  # no structure was read
        assert (round(s.composite, 6), s.exact) == (round(composite, 6), exact), qid
        by_task[task] = (answer, q.answer, s)
    for task in ("translation", "rotation", "translation_rotation", "rotation_rotation", "interaction_location"):
        assert by_task[task][2].exact, (task, by_task[task][:2])
    for task in ("residue_ligand_interaction", "pocket_ligand_interaction"):
        assert by_task[task][2].composite >= 0.5, (task, by_task[task][:2])
    answer, gold, _ = by_task["zooming"]
    assert abs(int(answer.split()[-1]) - int(gold.split()[-1])) <= 2, (answer, gold)
    assert f"{got['n_exact']}/9 exactly right" in text_of(tagged(nb, "agent"))
    assert "'7USH': 'images'" in text_of(tagged(nb, "trace"))


# Notebook name -> (probe code, checker). A notebook without an entry must still run cleanly
# and produce output.
CHECKS = {"explore_complex.ipynb": (PROBE, check_explore_complex),
          "hbond_rules.ipynb": (PROBE_RULES, check_hbond_rules),
          "image_grounding.ipynb": (PROBE_IMAGES, check_image_grounding)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook(path: Path, kernel_name: str):
    probe, check = CHECKS.get(path.name, (None, None))
    nb, got, seconds = execute(path, kernel_name, probe)
    print(f"\n{path.name}: executed in {seconds:.1f} s")
    assert any(c.outputs for c in nb.cells if c.cell_type == "code")
    if check is not None:
        check(nb, got)
