"""The router end to end on H-bond questions generated from the committed fixtures, the
structure store, the ligand choice and the reading of question texts.
"""
from __future__ import annotations

import gzip
import json
import shutil

import pytest

from agent_support import FIXTURES, generate
from misi_agent.agent.context import AgentContext, choose_ligand
from misi_agent.agent.details import DetailsError, ResidueRef, read_details, require
from misi_agent.agent.loop import answer_question, run_agent
from misi_agent.agent.planners.router import RouterPlanner, first_call
from misi_agent.agent.registry import Tool
from misi_agent.agent.store import ENV_VAR, StructureStore, UnknownStructureError, index_folder
from misi_agent.agent.toolset import CHEM_PROVIDER, SPATIAL_CONTRACTS, SPATIAL_PROVIDER, build_registry
from misi_agent.bench import tasks as T
from misi_agent.bench.prompts import build_prompt
from misi_agent.bench.question import Question, read_questions
from misi_agent.bench.scoring import score_item
from misi_agent.errors import MisiError
from misi_agent.structure import read_atoms


@pytest.fixture(scope="module")
def hbond_set(tmp_path_factory):
    path = generate(tmp_path_factory.mktemp("bench") / "hb", "residue_ligand_interaction,pocket_ligand_interaction", 8)
    return path, read_questions(path)


def _blind(q: Question) -> Question:
    """The question as a test taker gets it: no answer, no metadata."""
    return Question(q.id, q.task, q.question, list(q.images), "No", q.options, {})


def test_router_answers_hbond_questions_from_the_text_alone(hbond_set):
    path, qs = hbond_set
    store = StructureStore(use_env=False)
    router = RouterPlanner()
    n_pos = n_neg = 0
    for q in qs:
        result = answer_question(_blind(q), path.parent, router, store)
        assert result.error is None, (q.id, result.error)
        score = score_item(q, result.answer)
        assert score.composite == 1.0 and score.exact, (q.id, result.answer, q.answer)
        (call,) = result.tool_calls
        d = read_details(q.question)
        assert call["arguments"]["pdb_id"] == d.pdb_id == q.meta["pdb_id"].lower()
        assert "ligand" not in call["arguments"] and d.ligand is None  # the prompt never names the ligand
        if q.task == T.RESIDUE_LIGAND:
            assert call["name"] == "residue_hbonds" and call["arguments"]["chain"] == d.residue.chain
            assert call["output"]["in_pocket"] is True
            n_pos += result.answer.startswith("Yes")
            n_neg += result.answer == "No"
        else:
            assert call["name"] == "pocket_hbonds" and call["output"]["n_bonds"] == len(q.answer.split(";"))
        assert call["output"]["ligand"]["code"] == q.meta["ligand"]  # found from the text and the pictures
        assert result.trace.turns == 2 and result.trace.planner == {"planner": "router", "model": None}
    assert n_pos >= 3 and n_neg >= 3  # both kinds of residue-ligand item were exercised


def test_geometric_programs_name_the_spatial_tool_they_need(hbond_set):
    path, qs = hbond_set
    opts = ["move x 3, move y -2", "move x -3, move y -2", "move x 3, move y 2", "move x 5, move y -2"]
    text = build_prompt(T.INTERACTION_LOCATION, pdb_id="6YQW", chain="A", residue_name="ASN",
                        residue_number="100", residue_atom="ND2", ligand_atom="O17", options=opts)
    name, args = first_call(T.INTERACTION_LOCATION, read_details(text), 6)
    assert name == SPATIAL_CONTRACTS[T.INTERACTION_LOCATION].name
    assert args["bond"] == {"chain": "A", "residue_name": "ASN", "residue_number": "100", "residue_atom": "ND2",
                            "ligand_atom": "O17"}
    assert args["options"] == dict(zip("ABCD", opts)) and args["images"] == [1, 2, 3, 4, 5, 6]
    # atom names ending in primes or quotes (nucleotide-like ligands) are read whole from the prompt
    for res_atom, lig_atom in (("O5'", "O2'"), ("NZ", 'C1"'), ("OG", "N3*")):
        text_p = build_prompt(T.INTERACTION_LOCATION, pdb_id="6YQW", chain="A", residue_name="LYS",
                              residue_number="47", residue_atom=res_atom, ligand_atom=lig_atom, options=opts)
        bond = read_details(text_p).bond
        assert (bond.residue_atom, bond.ligand_atom) == (res_atom, lig_atom)
    text5 = build_prompt(T.TRANSLATION_ROTATION, pdb_id="6YQW", target_pdb_id="7F5D")
    name, args = first_call(T.TRANSLATION_ROTATION, read_details(text5), 11)
    assert (args["pdb_id"], args["target_pdb_id"]) == ("6yqw", "7f5d") and "target_ligand" not in args
    # every contract's schema accepts what the router sends
    for task, contract in SPATIAL_CONTRACTS.items():
        params = dict(pdb_id="6YQW")
        if task == T.TRANSLATION_ROTATION:
            params.update(target_pdb_id="7F5D")
        if task == T.INTERACTION_LOCATION:
            params.update(chain="A", residue_name="ASN", residue_number="100", residue_atom="ND2", ligand_atom="O17",
                          options=opts)
        n = T.task_info(task).n_images
        name, args = first_call(task, read_details(build_prompt(task, **params)), n)
        assert Tool(name, "d", contract.parameters, "o", lambda **k: k).validate(args) is None, task
    # without the spatial provider, the run stops with an error naming the tool and its provider
    q = Question("t", T.ROTATION, build_prompt(T.ROTATION, pdb_id="6YQW"),
                 [qs[0].images[0]] * 4, "roll x 15")
    images = q.image_paths(path.parent)
    registry = build_registry(AgentContext(images, StructureStore(use_env=False)), providers=(CHEM_PROVIDER,))
    result = run_agent(question_id=q.id, task=q.task, text=q.question, images=images, planner=RouterPlanner(),
                       registry=registry, normalise=lambda t: t)
    assert result.answer == "" and "needs tool 'solve_rotation'" in result.error and SPATIAL_PROVIDER in result.error


def test_router_rejects_questions_that_lack_their_details(hbond_set):
    path, qs = hbond_set
    q = next(q for q in qs if q.task == T.RESIDUE_LIGAND)
    stripped = Question(q.id, q.task, q.question.replace(" of chain ", " in "), list(q.images), "No")
    result = answer_question(stripped, path.parent, RouterPlanner(), StructureStore(use_env=False))
    assert result.answer == "" and "does not state the residue" in result.error
    with pytest.raises(DetailsError, match="PDB ID"):
        require(read_details("no identifiers here"), "pocket_ligand_interaction")


def test_ligand_choice_uses_only_what_the_question_states():
    atoms = read_atoms(FIXTURES / "7x9k.cif.gz")  # 8DG (largest), 8OG (the manifest's ligand), FRU
    assert choose_ligand(atoms).chosen.key.name == "8DG"
    by_code = choose_ligand(atoms, code="8OG")
    assert by_code.chosen.key.name == "8OG" and "named in the question" in by_code.reason
    names = by_code.chosen.atom_names[:2]
    assert choose_ligand(atoms, atom_names=names).chosen.key.name == "8OG"
    # a named residue keeps only ligands whose 10 Å pocket holds it: HIS 64 A is 4.2 Å from FRU, 18.5 Å from 8DG
    near_fru = choose_ligand(atoms, residue=ResidueRef("HIS", 64, "", "A"))
    assert near_fru.chosen.key.name == "FRU" and "HIS 64 of chain A is in its pocket" in near_fru.reason
    # ARG 23 A is in the shared pocket of 8DG and 8OG: the larger wins unless the code is named
    assert choose_ligand(atoms, residue=ResidueRef("ARG", 23, "", "A")).chosen.key.name == "8DG"
    assert choose_ligand(atoms, code="8OG", residue=ResidueRef("ARG", 23, "", "A")).chosen.key.name == "8OG"
    # a residue that is nowhere near any ligand does not filter
    assert choose_ligand(atoms, residue=ResidueRef("XXX", 9999, "", "Z")).chosen.key.name == "8DG"
    one = choose_ligand(read_atoms(FIXTURES / "1hpx.pdb.gz"))
    assert one.chosen.key.name == "KNI" and len(one.candidates) == 1


def test_store_search_order_formats_and_errors(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert StructureStore().find("6YQW").origin == "embedded"
    # a local folder wins over the fixtures; plain and gzipped, mmCIF and PDB, odd names
    local = tmp_path / "local"
    (local / "sub").mkdir(parents=True)
    (local / "6yqw.cif").write_bytes(gzip.decompress((FIXTURES / "6yqw.cif.gz").read_bytes()))
    shutil.copy(FIXTURES / "1aku.pdb.gz", local / "sub" / "pdb1aku.ent.gz")
    shutil.copy(FIXTURES / "7f5d.cif.gz", local / "7F5D_holo.cif.gz")
    store = StructureStore([local], use_env=False)
    assert store.find("6yqw").path == local / "6yqw.cif" and store.find("6yqw").origin == "local"
    assert store.find("1AKU").path == local / "sub" / "pdb1aku.ent.gz"
    assert store.find("7f5d").path.name == "7F5D_holo.cif.gz"
    assert store.find("7x9k").origin == "embedded"
    # a manifest names files and ligand codes (recorded, not used for the ligand choice)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(FIXTURES / "7x9k.cif.gz", other / "entry_a.cif.gz")
    (other / "manifest.csv").write_text("pdb_id,ligand_ccd,file\n7x9k,8OG,entry_a.cif.gz\n")
    monkeypatch.setenv(ENV_VAR, f"{tmp_path / 'missing'}:{other}")
    hit = StructureStore().find("7X9K")
    assert hit.path == other / "entry_a.cif.gz" and hit.ligand_codes == ("8OG",)
    with pytest.raises(UnknownStructureError, match="no structure file for PDB ID 9ZZZ.*--allow-download"):
        StructureStore([local], use_env=False, include_embedded=False).find("9zzz")
    with pytest.raises(MisiError, match="not a PDB ID"):
        store.find("../etc")
    with pytest.raises(MisiError, match="no such folder"):
        StructureStore([tmp_path / "nope"])
    assert "7x9k" in index_folder(str(FIXTURES))


def test_details_read_from_every_prompt():
    opts = ["move x 1, move y 2"] * 4
    for task in T.TASK_IDS:
        params = {"pdb_id": "7X9K"}
        if task == T.RESIDUE_LIGAND:
            params.update(residue_name="ARG", residue_number="23A", chain="B")
        if task == T.TRANSLATION_ROTATION:
            params.update(target_pdb_id="1HPX")
        if task == T.INTERACTION_LOCATION:
            params.update(chain="A", residue_name="LYS", residue_number="39", residue_atom="N", ligand_atom="O1B",
                          options=opts)
        d = read_details(build_prompt(task, **params))
        assert d.pdb_id == "7x9k" and d.ligand is None, task  # prompts never name the ligand
        if task == T.RESIDUE_LIGAND:
            assert (d.residue.name, d.residue.number, d.residue.ins_code, d.residue.chain) == ("ARG", 23, "A", "B")
        if task == T.TRANSLATION_ROTATION:
            assert d.pdb_ids == ("7x9k", "1hpx") and d.ligands == ()
        if task == T.INTERACTION_LOCATION:
            assert d.bond.residue_atom == "N" and d.bond.ligand_atom == "O1B" and d.ligand_atoms == ("O1B",)
            assert list(d.options) == ["A", "B", "C", "D"]
    assert read_details("Residue chain A, HIS 57 in PDB ID 1abc").residue.label() == "HIS 57"
    assert json.dumps(read_details("nothing").options) == "{}"
