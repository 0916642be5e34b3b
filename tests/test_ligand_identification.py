"""The agent finds the pictured ligand among an entry's candidates by comparing silhouettes."""
from pathlib import Path

import numpy as np
import pytest

from misi_agent.render.raster import RasterRenderer
from misi_agent.scene import scene_from_complex
from misi_agent.structure import ligand_candidates, load_complex, read_atoms
from misi_agent.tools.ligand_identification import foreground, grey, load_rgb, match_candidates

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "structures"


def _candidate_scenes(path: Path):
    atoms = read_atoms(path)
    scenes = []
    for key, _ in ligand_candidates(atoms):
        try:
            scenes.append(scene_from_complex(load_complex(path, ligand_key=key), "front"))
        except Exception:
            continue
    return scenes


@pytest.mark.parametrize("path", [FIXTURES / "7x9k.cif.gz", SHARED / "plip" / "1n7g.pdb.gz"])
def test_each_pictured_candidate_is_recognised(path):
    if not path.exists():
        pytest.skip(f"{path} not available")
    scenes = _candidate_scenes(path)
    assert len(scenes) >= 3  # 7x9k: 8DG, 8OG, FRU; 1n7g: four NDP and three GDR copies
    renders = RasterRenderer().render_many(scenes, 320)
    for j, r in enumerate(renders):
        m = match_candidates(r.image, scenes)
        assert m.best == j, (path.name, j, m.to_dict())
        assert m.margin > 0


def test_masks_follow_the_picture_not_the_renderer():
    rgb = np.zeros((40, 40, 3))
    rgb[10:20, 10:20] = [0.5, 0.5, 0.5]  # a grey ligand carbon
    rgb[25:30, 25:30] = [1.0, 1.0, 1.0]  # white label text
    rgb[0:5, 30:35] = [0.75, 0.6, 0.95]  # a purple pocket carbon
    fg, gr = foreground(rgb), grey(rgb)
    assert fg[15, 15] == fg[27, 27] == fg[2, 32] == 1 and fg[35, 5] == 0
    assert gr[15, 15] == 1 and gr[27, 27] == 0 and gr[2, 32] == 0
    white_bg = 1.0 - rgb  # a white background is estimated from the border too
    assert foreground(white_bg)[35, 5] == 0 and foreground(white_bg)[15, 15] == 1


def test_unreadable_picture_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(ValueError, match="cannot read image"):
        load_rgb(bad)
