"""Find a known text in a picture where labels overlap: word spotting with glyphs learnt from the picture's own reads.

Why: PyMOL draws every label at its anchor and makes no room, so the labels of the residues that line the ligand and
the ligand's own atom names pile up in the middle of every view. The reader (:mod:`misi_agent.tools.label_reading`)
finds glyphs as connected components of the text colour; in a pile they merge and nothing is read. When the text is
known (the residue and the ligand atom a T8 question names), finding it is a check, not a reading: does a text that
looks like ``LYS 47`` lie anywhere in the picture, and where?

Calibrated on the item, no renderer constant: a glyph's template is the mean text strength (α of
:func:`misi_agent.tools.label_reading.text_alpha`) of the glyphs the reader read with confidence in the item's views
(same font, size and antialiasing as the hidden text), and the spacing of glyphs and words is measured on the same
reads. A text is scored by the normalised cross-correlation of each of its glyphs at its place in the word (each
glyph may slide a pixel or two, as kerning moves it), averaged over the glyphs; a place is taken only where most
glyphs correlate better with their own template than with any other glyph's of the same sort (a letter against
letters, a digit against digits), so a pile of strokes that fits any text does not pass.

Used by T8 (:func:`misi_agent.tools.image_tasks.bond_candidates`: the named residue and ligand atom spotted where
they were not read; PyMOL 80 → 84 on 50 items). :func:`with_hidden_residue_labels` reads residue labels out of the
piles: every peak of a residue name's correlation where no label was read is tried with the numbers worth trying,
and the number is decided across views (:func:`hidden_places`, :func:`chosen_texts`). T9
(:func:`misi_agent.tools.image_hbonds.pocket_hbonds_from_images`) uses it since the ligand's hidden atoms are placed
from their labels and the dictionary: fresh runs of 20 items, PyMOL 10.40 → 11.23 with the name's best spots and each
view's best number, → 15.00 with every peak and the numbers decided across views (raster 53.19 → 53.70 → 52.00);
measurements in ``eval/results/label_spotting.md``. :meth:`Spotter.scores_near` checks a text at known places: the
ligand's atom names at their atoms (:mod:`misi_agent.tools.ligand_name_spotting`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Collection, Mapping, Sequence

import numpy as np
from scipy import ndimage
from scipy.signal import fftconvolve

from misi_agent.knowledge import STANDARD_RESIDUES
from misi_agent.tools.atom_detection import as_rgb
from misi_agent.tools.label_reading import ALPHABET, DIGITS, MIN_GLYPH_H, Glyph, ImageLabels, LabelRead, text_alpha

CONFIDENT = 0.95  # a glyph read at least this surely is a template sample
SLIDE_X, SLIDE_Y = 2, 1  # px a glyph may move from its place in the word (kerning, rounding)
MIN_SCORE = 0.6  # mean glyph correlation of a spotted text. Set by hand on five PyMOL T8 items, where the texts the
# reader read score a median 0.83 at their read box; what it gives: eval/results/label_spotting.md
MIN_OWN_SHARE = 0.75  # share of a spotted text's glyphs that fit their own template best


@dataclass(frozen=True)
class GlyphTemplates:
    """Glyph templates of one item's label font: mean α crop and top offset (px below the line top) per character,
    and the horizontal step from one glyph's left edge to the next one's, ``lead[a] + trail[b]`` for the pair a, b
    (ink boxes: a narrow letter's box begins later in its cell), plus ``space`` between a residue's name and number."""

    glyphs: Mapping[str, np.ndarray]
    top: Mapping[str, float]
    lead: Mapping[str, float]
    trail: Mapping[str, float]
    space: float | None

    def can_spell(self, text: str) -> bool:
        chars = text.replace(" ", "")
        return bool(chars) and all(ch in self.glyphs for ch in chars) and (" " not in text or self.space is not None)

    def step(self, a: str, b: str) -> float:
        """px from glyph ``a``'s left edge to the next glyph ``b``'s (the median lead or trail for a character
        never read on that side of a pair)."""
        lead = self.lead.get(a)
        trail = self.trail.get(b)
        if lead is None:
            lead = float(np.median(list(self.lead.values())))
        if trail is None:
            trail = float(np.median(list(self.trail.values())))
        return lead + trail


@dataclass(frozen=True)
class Spot:
    """Where a text was found: its box (x0, y0, x1, y1, exclusive ends), mean glyph correlation, share of glyphs
    that fit their own template best."""

    box: tuple[int, int, int, int]
    score: float
    own_share: float

    @property
    def centre(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.box
        return (x0 + x1) / 2.0, (y0 + y1) / 2.0


def label_alphas(image: Any, labels: ImageLabels) -> dict[int, np.ndarray]:
    """α (0..1) of each text colour of ``labels`` in ``image``, by colour index."""
    rgb = as_rgb(image)
    out = {}
    for ci, col in enumerate(labels.colours):
        found = text_alpha(rgb, col)
        if found is not None:
            alpha, mask = found
            out[ci] = np.where(mask, np.clip(alpha, 0.0, 1.0), 0.0).astype(np.float32)
    return out


def learn_templates(pages: Sequence[tuple[ImageLabels, Mapping[int, np.ndarray]]]) -> GlyphTemplates | None:
    """Templates from the confident reads of an item's views (``pages``: each view's labels and
    :func:`label_alphas`). A character's crops of a size off the usual by more than a pixel (a glyph cut or merged)
    are left out; the rest are averaged on their top-left corners. The steps between glyphs are fitted by least
    squares over every pair of neighbours read. None when no glyph was read surely."""
    crops: dict[str, list[np.ndarray]] = {}
    tops: dict[str, list[float]] = {}
    pairs: list[tuple[str, str, bool, float]] = []  # (left char, right char, across the space, step px)
    for labels, alphas in pages:
        for lab in labels.labels:
            if lab.kind not in ("residue", "ligand") or lab.colour not in alphas:
                continue
            gs = lab.glyphs
            if not gs or any(g.fixed or g.confidence < CONFIDENT or g.box[3] - g.box[1] < MIN_GLYPH_H
                             or g.char == "'" for g in gs):
                continue
            if lab.kind == "residue" and (lab.reading != lab.raw_text or len(lab.words) != 2):
                continue
            a = alphas[lab.colour]
            for g in gs:
                x0, y0, x1, y1 = g.box
                crops.setdefault(g.char, []).append(a[y0:y1, x0:x1])
                tops.setdefault(g.char, []).append(float(y0 - lab.box[1]))
            for wi, w in enumerate(lab.words):
                pairs += [(p.char, b.char, False, float(b.box[0] - p.box[0])) for p, b in zip(w[:-1], w[1:])]
                if wi:
                    p, b = lab.words[wi - 1][-1], w[0]
                    pairs.append((p.char, b.char, True, float(b.box[0] - p.box[0])))
    glyphs, top = {}, {}
    for ch, cs in crops.items():
        hs, ws = np.median([c.shape[0] for c in cs]), np.median([c.shape[1] for c in cs])
        keep = [k for k, c in enumerate(cs) if abs(c.shape[0] - hs) <= 1 and abs(c.shape[1] - ws) <= 1]
        if not keep:
            continue
        H, W = max(cs[k].shape[0] for k in keep), max(cs[k].shape[1] for k in keep)
        canvas = np.zeros((H, W), np.float32)
        for k in keep:
            canvas[:cs[k].shape[0], :cs[k].shape[1]] += cs[k]
        glyphs[ch] = canvas / len(keep)
        top[ch] = float(np.median([tops[ch][k] for k in keep]))
    if not glyphs or not pairs:
        return None
    lead, trail, space = _fit_steps(pairs)
    return GlyphTemplates(glyphs, top, lead, trail, space)


def _fit_steps(pairs: Sequence[tuple[str, str, bool, float]]
               ) -> tuple[dict[str, float], dict[str, float], float | None]:
    """Least squares step = lead[a] + trail[b] (+ space across a word break), lightly pulled to the mean step."""
    chars = sorted({p[0] for p in pairs} | {p[1] for p in pairs})
    ix = {c: k for k, c in enumerate(chars)}
    n = len(chars)
    has_space = any(p[2] for p in pairs)
    cols = 2 * n + 1
    A = np.zeros((len(pairs) + 2 * n, cols))
    y = np.zeros(len(pairs) + 2 * n)
    steps = np.array([p[3] for p in pairs if not p[2]] or [p[3] for p in pairs], float)
    for r, (a, b, sp, d) in enumerate(pairs):
        A[r, ix[a]] = 1.0
        A[r, n + ix[b]] = 1.0
        A[r, 2 * n] = float(sp)
        y[r] = d
    ridge = 0.1
    for k in range(n):  # a weak prior: lead = the mean step, trail = 0
        A[len(pairs) + k, k] = ridge
        y[len(pairs) + k] = ridge * float(np.median(steps))
        A[len(pairs) + n + k, n + k] = ridge
    sol = np.linalg.lstsq(A, y, rcond=None)[0]
    lead = {c: float(sol[ix[c]]) for c in chars if any(p[0] == c for p in pairs)}
    trail = {c: float(sol[n + ix[c]]) for c in chars if any(p[1] == c for p in pairs)}
    return lead, trail, float(sol[2 * n]) if has_space else None


def ncc_map(alpha: np.ndarray, template: np.ndarray) -> np.ndarray:
    """Normalised cross-correlation of ``template`` at every place inside ``alpha`` (top-left corners); 0 where
    the picture is flat."""
    h, w = template.shape
    t = template - template.mean()
    tn = float(np.sqrt((t * t).sum()))
    if tn == 0 or alpha.shape[0] < h or alpha.shape[1] < w:
        return np.zeros((max(0, alpha.shape[0] - h + 1), max(0, alpha.shape[1] - w + 1)), np.float32)
    num = fftconvolve(alpha, t[::-1, ::-1], mode="valid")
    c1 = np.pad(alpha, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    c2 = np.pad(alpha * alpha, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    box = lambda c: c[h:, w:] - c[:-h, w:] - c[h:, :-w] + c[:-h, :-w]
    s1, s2 = box(c1), box(c2)
    var = np.maximum(s2 - s1 * s1 / (h * w), 0.0)
    den = np.sqrt(var) * tn
    return np.where(den > 1e-3, num / np.maximum(den, 1e-9), 0.0).astype(np.float32)


class Spotter:
    """Word spotting in one text colour of one picture; each glyph's correlation map is computed once."""

    def __init__(self, alpha: np.ndarray, templates: GlyphTemplates):
        self.alpha = alpha
        self.t = templates
        self._maps: dict[str, np.ndarray] = {}

    def _map(self, ch: str) -> np.ndarray:
        if ch not in self._maps:
            m = ncc_map(self.alpha, self.t.glyphs[ch])
            self._maps[ch] = ndimage.maximum_filter(m, size=(2 * SLIDE_Y + 1, 2 * SLIDE_X + 1), mode="constant",
                                                    cval=-1.0)
        return self._maps[ch]

    def layout(self, text: str) -> list[tuple[str, int, int]]:
        """(char, x, y) of each glyph's top-left corner, relative to the text's top-left."""
        out, x, prev, gap = [], 0.0, None, False
        for ch in text:
            if ch == " ":
                gap = True
                continue
            if prev is not None:
                x += self.t.step(prev, ch) + (self.t.space or 0.0) * gap
            out.append((ch, int(round(x)), int(round(self.t.top[ch]))))
            prev, gap = ch, False
        return out

    def spot(self, text: str, max_spots: int = 3, check_end: bool = True) -> list[Spot]:
        """The places where ``text`` may be drawn, best first (at most ``max_spots``, far enough apart not to be
        one text), each with its score; those under :data:`MIN_SCORE` or :data:`MIN_OWN_SHARE` are left out, and with
        ``check_end`` those that go on with another glyph (:meth:`_continues`)."""
        text = str(text).upper().strip()
        if not text or not self.t.can_spell(text):
            return []
        lay = self.layout(text)
        made = self.text_map(lay)
        if made is None:
            return []
        score, (hh, ww) = made
        score /= len(lay)
        out: list[Spot] = []
        work = score.copy()
        for _ in range(4 * max_spots):
            i, j = np.unravel_index(int(np.argmax(work)), work.shape)
            s = float(work[i, j])
            if s < MIN_SCORE or len(out) >= max_spots:
                break
            work[max(0, i - hh):i + hh, max(0, j - ww):j + ww] = -1.0
            i, j = int(i), int(j)
            if self.passes(lay, i, j, check_end):
                out.append(Spot((j, i, j + ww, i + hh), s, self._own_share(lay, i, j)[0]))
        return out

    def extent(self, lay: list[tuple[str, int, int]]) -> tuple[int, int]:
        """(height, width) in px of the text laid out as ``lay`` (:meth:`layout`), from its top-left."""
        return (max(y + self.t.glyphs[ch].shape[0] for ch, _, y in lay),
                max(x + self.t.glyphs[ch].shape[1] for ch, x, _ in lay))

    def text_map(self, lay: list[tuple[str, int, int]]) -> tuple[np.ndarray, tuple[int, int]] | None:
        """The summed glyph correlation of the text laid out as ``lay`` (:meth:`layout`) at every top-left place it
        fits in the picture, and the text's (height, width); None when it does not fit."""
        H, W = self.alpha.shape
        hh, ww = self.extent(lay)
        if hh > H or ww > W:
            return None
        oh, ow = H - hh + 1, W - ww + 1
        score = np.zeros((oh, ow), np.float32)
        for ch, x, y in lay:
            score += self._map(ch)[y:y + oh, x:x + ow]
        return score, (hh, ww)

    def score_at(self, lay: list[tuple[str, int, int]], i: int, j: int) -> float:
        """Mean glyph correlation of the text laid out as ``lay`` (:meth:`layout`) with its top-left at (i, j)."""
        return float(np.mean([self._value(ch, i + y, j + x) for ch, x, y in lay]))

    def scores_near(self, lay: list[tuple[str, int, int]], ii: np.ndarray, jj: np.ndarray, reach: int) -> np.ndarray:
        """Mean glyph correlation of the text laid out as ``lay`` with its top-left at each (ii[k], jj[k]), the best
        within ``reach`` px of it (−1 where the text does not fit): the text checked at known places, gathered from
        the glyph maps without a map of the whole text."""
        d = np.arange(-reach, reach + 1)
        di, dj = (a.ravel() for a in np.meshgrid(d, d, indexing="ij"))
        return self.means_at(lay, np.asarray(ii, int)[:, None] + di[None, :],
                             np.asarray(jj, int)[:, None] + dj[None, :]).max(axis=1)

    def means_at(self, lay: list[tuple[str, int, int]], ii: np.ndarray, jj: np.ndarray) -> np.ndarray:
        """Mean glyph correlation of the text laid out as ``lay`` with its top-left at (ii, jj) (integer arrays of one
        shape), −1 where it does not fit: gathered from the glyph maps, as :meth:`score_at` at one place."""
        total = np.zeros(np.shape(ii))
        inside = np.ones(np.shape(ii), bool)
        for ch, x, y in lay:
            m = self._map(ch)
            r, c = ii + y, jj + x
            inside &= (r >= 0) & (r < m.shape[0]) & (c >= 0) & (c < m.shape[1])
            total += m[np.clip(r, 0, m.shape[0] - 1), np.clip(c, 0, m.shape[1] - 1)]
        return np.where(inside, total / len(lay), -1.0)

    def passes(self, lay: list[tuple[str, int, int]], i: int, j: int, check_end: bool = True) -> bool:
        """Whether the text at (i, j) is its own and not another's: at least :data:`MIN_OWN_SHARE` of its glyphs and
        every digit fit their own template best, and (with ``check_end``) no glyph follows it (:meth:`_continues`)."""
        own, digits_own = self._own_share(lay, i, j)
        return own >= MIN_OWN_SHARE and digits_own and not (check_end and self._continues(lay, i, j))

    def prepare(self) -> None:
        """Make every glyph's map now (worth it when many texts are tried: each glyph is a rival somewhere)."""
        for ch in self.t.glyphs:
            self._map(ch)

    def _own_share(self, lay: list[tuple[str, int, int]], i: int, j: int) -> tuple[float, bool]:
        """Share of the glyphs at (i, j) whose own template fits at least as well as any other of their sort, and
        whether every digit does (the number is what tells neighbours' labels apart)."""
        own, digits_own = 0, True
        for ch, x, y in lay:
            v = self._value(ch, i + y, j + x)
            rivals = [c for c in self.t.glyphs if c != ch and (c in DIGITS) == (ch in DIGITS)]
            best = max((self._value(c, i + y, j + x) for c in rivals), default=-1.0)
            own += v >= best
            digits_own &= ch not in DIGITS or v >= best
        return own / len(lay), digits_own

    def _continues(self, lay: list[tuple[str, int, int]], i: int, j: int) -> bool:
        """Whether a glyph of the font follows the text as closely as the text's own glyphs follow each other
        (``ALA 4`` found inside ``ALA 41``): a template fits the next place better than the text's weakest glyph
        and better than every other template there."""
        ch, x, _ = lay[-1]
        weakest = min(self._value(c, i + y, j + xx) for c, xx, y in lay)
        for c in self.t.glyphs:
            at = (i + int(round(self.t.top[c])), j + int(round(x + self.t.step(ch, c))))
            v = self._value(c, *at)
            if v > max(weakest, MIN_SCORE) and all(v >= self._value(r, *at) for r in self.t.glyphs if r != c):
                return True
        return False

    def _value(self, ch: str, i: int, j: int) -> float:
        """The glyph's correlation at (i, j), best within the slide: from its map when that was made, else computed
        at this one place (the rivals of a text's glyphs are only ever needed at a few places)."""
        if ch in self._maps:
            m = self._maps[ch]
            return float(m[i, j]) if 0 <= i < m.shape[0] and 0 <= j < m.shape[1] else -1.0
        t = self.t.glyphs[ch]
        h, w = t.shape
        H, W = self.alpha.shape
        i0, i1 = max(0, i - SLIDE_Y), min(H - h, i + SLIDE_Y)
        j0, j1 = max(0, j - SLIDE_X), min(W - w, j + SLIDE_X)
        if i0 > i1 or j0 > j1:
            return -1.0
        return float(ncc_map(self.alpha[i0:i1 + h, j0:j1 + w], t).max())


def spotters(images: Mapping[str, Any], labels: Mapping[str, ImageLabels]) -> dict[str, dict[str, Spotter]]:
    """Per view, a :class:`Spotter` per label kind (``residue``, ``ligand``), with templates learnt from every
    view's confident reads. Views or kinds whose text colour was not found are absent."""
    alphas = {v: label_alphas(images[v], labels[v]) for v in labels if v in images}
    tpl = learn_templates([(labels[v], alphas[v]) for v in alphas])
    if tpl is None:
        return {}
    out: dict[str, dict[str, Spotter]] = {}
    for v, al in alphas.items():
        kinds = {}
        for kind in ("residue", "ligand"):
            cis = [lab.colour for lab in labels[v].of_kind(kind)]
            if cis:
                ci = max(set(cis), key=cis.count)
                if ci in al:
                    kinds[kind] = Spotter(al[ci], tpl)
        out[v] = kinds
    return out


# ----------------------------------------------------------------------------- reading hidden residue labels

NUMBER_REACH = 3  # numbers tried for a hidden label: those read, and this far from one
# (gold residues of the 20 PyMOL T9 test items: 46 of 99 numbers read somewhere, 92 within 2, 96 within 3)
HIDDEN_MIN_VIEWS = 2  # a text read from a pile is kept when it is read or found in this many views
SPOTTED_PROB = 0.9  # probability given to a spotted glyph's character (the rest spread over the alphabet)
NUMBER_MARGIN = 0.03  # numbers fitting within this of the best behind a spotted name are told apart across views
MAX_NAME_PLACES = 400  # peaks of a residue name's correlation tried for hidden labels, per name and view
NUMBERS_CHECKED = 4  # the best-fitting numbers behind a name whose every glyph is checked (Spotter.passes)


def _glyph(ch: str, box: tuple[int, int, int, int]) -> Glyph:
    p = np.full(len(ALPHABET), (1.0 - SPOTTED_PROB) / (len(ALPHABET) - 1), np.float32)
    p[ALPHABET.index(ch)] = SPOTTED_PROB
    return Glyph(box, p)


@dataclass(frozen=True)
class HiddenPlace:
    """A residue name spotted where no read label lies, with every number worth trying that passes behind it there
    (``options``: text and mean correlation, best first)."""

    view: str
    ij: tuple[int, int]
    name: str
    options: tuple[tuple[str, float], ...]

    def plausible(self, margin: float = NUMBER_MARGIN) -> list[str]:
        """The texts within ``margin`` of the best one here: one view cannot tell them apart."""
        return [t for t, s in self.options if s >= self.options[0][1] - margin]


def _padded(m: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """``m`` in the top-left corner of a ``shape`` array of −1 (no correlation outside the map): indexing it past
    ``m``'s edges needs no bounds check."""
    out = np.full(shape, -1.0, np.float32)
    out[:m.shape[0], :m.shape[1]] = m
    return out


def _class_best(spotter: Spotter, shape: tuple[int, int]) -> dict[bool, np.ndarray]:
    """Per glyph sort (digit or not), the best correlation of any of its templates at each top-left place (−1 past
    the maps, in a ``shape`` array): a glyph is its place's best of its sort when its own map reaches this."""
    out = {d: np.full(shape, -1.0, np.float32) for d in (False, True)}
    for ch in spotter.t.glyphs:
        m = spotter._map(ch)
        o = out[ch in DIGITS][:m.shape[0], :m.shape[1]]
        np.maximum(o, m, out=o)
    return out


def hidden_places(view: str, spotter: Spotter, read: Sequence[LabelRead], numbers: Collection[int],
                  max_places: int = MAX_NAME_PLACES, tried: int = NUMBERS_CHECKED) -> list[HiddenPlace]:
    """Every place in one view, where no read label lies, at which a residue name followed by a number among
    ``numbers`` fits: the text's mean correlation at least :data:`MIN_SCORE`, most of its glyphs and every digit
    their place's best template, nothing after it (:meth:`Spotter.passes`, checked for the ``tried`` best numbers).

    Every local peak of a name's correlation is tried (the ``max_places`` best), not only the name's best spots: in
    a pile the name alone peaks as high at many places, and its own place is often next to a stronger one (on the 20
    PyMOL T9 test items a hidden gold residue's text was found at its CA in 56 views where its name alone was not
    among the name's spots). The numbers are scored at all places at once from the glyph maps.

    ``numbers`` are the residue numbers worth trying: pocket residues come in runs along the chain, so the numbers
    read in the item's views and their near neighbours (:func:`nearby_numbers`) hold nearly every hidden one."""
    t = spotter.t
    if t.space is None:
        return []
    nums = [str(n) for n in sorted(set(numbers)) if n >= 0 and all(d in t.glyphs for d in str(n))]
    if not nums:
        return []
    spotter.prepare()
    H, W = spotter.alpha.shape
    gh, gw = (max(g.shape[k] for g in t.glyphs.values()) for k in (0, 1))
    pad = (H + 2 * gh, W + 4 * gw * (4 + max(len(n) for n in nums)))  # past any glyph of a name and its number
    digit_maps = {d: _padded(spotter._map(d), pad) for d in DIGITS if d in t.glyphs}
    best = _class_best(spotter, pad)
    taken = [lab.box for lab in read]
    out: list[HiddenPlace] = []
    for name in STANDARD_RESIDUES:
        if not t.can_spell(name):
            continue
        lay = spotter.layout(name)
        made = spotter.text_map(lay)
        if made is None:
            continue
        score, (hh, ww) = made
        oh, ow = score.shape
        own = np.zeros((oh, ow), np.float32)
        for ch, x, y in lay:
            own += spotter._map(ch)[y:y + oh, x:x + ow] >= best[False][y:y + oh, x:x + ow]
        peak = (score == ndimage.maximum_filter(score, size=(3, 5))) & (score >= MIN_SCORE * len(lay))
        ii, jj = np.nonzero(peak)
        if not len(ii):
            continue
        order = np.argsort(-score[ii, jj], kind="stable")[:max_places]  # stable: max-filtered maps tie exactly, and an
        # unstable sort orders ties by the machine's SIMD kernel (7b94: 13 labels 1 px apart, AVX-512 against AVX2)
        ii, jj = ii[order], jj[order]
        keep = np.array([not any(_overlap((j, i, j + ww, i + hh), b) for b in taken) for i, j in zip(ii, jj)], bool)
        ii, jj = ii[keep], jj[keep]
        if not len(ii):
            continue
        total = np.empty((len(nums), len(ii)), np.float32)
        ok = np.empty((len(nums), len(ii)), bool)
        name_score, name_own = score[ii, jj], own[ii, jj]
        for k, num in enumerate(nums):
            full = spotter.layout(f"{name} {num}")
            s_k, own_k = name_score.copy(), name_own.copy()
            digits_own = np.ones(len(ii), bool)
            for ch, x, y in full[len(lay):]:
                v = digit_maps[ch][ii + y, jj + x]
                s_k += v
                mine = v >= best[True][ii + y, jj + x]
                digits_own &= mine
                own_k += mine
            total[k] = s_k / len(full)
            ok[k] = (total[k] >= MIN_SCORE) & digits_own & (own_k >= MIN_OWN_SHARE * len(full))
        for p in np.flatnonzero(ok.any(axis=0)):
            i, j = int(ii[p]), int(jj[p])
            cand = [k for k in np.argsort(-total[:, p], kind="stable") if ok[k, p]][:tried]
            options = [(f"{name} {nums[k]}", float(total[k, p])) for k in cand
                       if spotter.passes(spotter.layout(f"{name} {nums[k]}"), i, j)]
            if options:
                out.append(HiddenPlace(view, (i, j), name, tuple(options)))
    return out


def chosen_texts(places: Sequence[HiddenPlace], read_views: Mapping[str, set[str]], numbers: Collection[int] = (),
                 margin: float = NUMBER_MARGIN) -> dict[int, str]:
    """The text each place (index into ``places``) is read as, decided across views: at one place the numbers within
    ``margin`` of the best fit about equally (``VAL 111`` 0.8318 and ``VAL 114`` 0.8319 on 6z1c's front view), but a
    label is drawn in every view, so the one that is plausible, or read (``read_views``: text → views), in the most
    views is taken (then the best fit). A number that begins another one of the same name that is read or plausible
    is left out: the rest of it may lie under another label (PyMOL's ``ASP 40`` spotted as ``ASP 4``); so is a
    one-digit number that begins any of ``numbers`` (the numbers worth trying): on the 20 PyMOL T9 test items 13 of
    the 19 texts added that name no residue of the item had one digit, and none of the 48 right ones."""
    support: dict[str, set[str]] = {t: set(v) for t, v in read_views.items()}
    for p in places:
        for text in p.plausible(margin):
            support.setdefault(text, set()).add(p.view)
    out: dict[int, str] = {}
    for k, p in enumerate(places):
        score = dict(p.options)
        text = max(p.plausible(margin), key=lambda x: (len(support[x]), score[x]))
        name, num = text.split()
        if any(other != text and other.split()[0] == name and other.split()[1].startswith(num) for other in support):
            continue
        if len(num) == 1 and any(str(n) != num and str(n).startswith(num) for n in numbers):
            continue
        out[k] = text
    return out


def place_label(spotter: Spotter, place: HiddenPlace, text: str, colour: int) -> LabelRead:
    """The :class:`LabelRead` of kind ``residue`` for ``text`` spotted at ``place``, its glyphs carrying
    :data:`SPOTTED_PROB` on the character found."""
    (i, j), t = place.ij, spotter.t
    glyphs = [_glyph(ch, (j + x, i + y, j + x + t.glyphs[ch].shape[1], i + y + t.glyphs[ch].shape[0]))
              for ch, x, y in spotter.layout(text)]
    box = (min(g.box[0] for g in glyphs), min(g.box[1] for g in glyphs), max(g.box[2] for g in glyphs),
           max(g.box[3] for g in glyphs))
    return LabelRead((tuple(glyphs[:3]), tuple(glyphs[3:])), box, colour, "residue", text)


def residue_label_colour(labels: ImageLabels) -> int | None:
    """The text colour most of the view's residue labels are read in (the colour a label found in a pile is given);
    None when the view has none."""
    colours = [lab.colour for lab in labels.of_kind("residue")]
    return max(set(colours), key=colours.count) if colours else None


def read_views(labels: Mapping[str, ImageLabels]) -> dict[str, set[str]]:
    """Every residue text read in ``labels``, with the views it is read in."""
    out: dict[str, set[str]] = {}
    for v, labs in labels.items():
        for lab in labs.of_kind("residue"):
            out.setdefault(lab.text, set()).add(v)
    return out


def nearby_numbers(labels: Mapping[str, ImageLabels], reach: int = NUMBER_REACH) -> set[int]:
    """Every residue number read in ``labels`` and those within ``reach`` of one."""
    read = set()
    for labs in labels.values():
        for lab in labs.of_kind("residue"):
            words = lab.text.split()
            if len(words) == 2 and words[1].isdigit():
                read.add(int(words[1]))
    return {n + d for n in read for d in range(-reach, reach + 1)}


def _overlap(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether two boxes share more than a third of the smaller one's area."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return False
    small = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w * h > small / 3.0


def with_hidden_residue_labels(images: Mapping[str, Any], labels: Mapping[str, ImageLabels],
                               min_views: int = HIDDEN_MIN_VIEWS,
                               sp: Mapping[str, Mapping[str, Spotter]] | None = None) -> dict[str, ImageLabels]:
    """``labels`` with, in every view, the residue labels read out of the piles added: names spotted where no label
    was read (:func:`hidden_places`), numbers decided across views (:func:`chosen_texts`); a text so found is kept
    only where it is read or found in at least ``min_views`` views in all (a label is drawn in every view, a misfit
    of the templates seldom twice), in one more when it is read in none (of the texts spotted in two views and read
    in none on the 20 PyMOL T9 test items, 56 % name no residue of the item; in three or more, 18 %), and not where
    it overlaps a better-fitting one found before it. ``sp``: the item's :func:`spotters`, where the caller made them
    already."""
    sp = sp if sp is not None else spotters(images, labels)
    numbers = nearby_numbers(labels)
    places: list[HiddenPlace] = []
    colours: dict[str, int] = {}
    for v, kinds in sp.items():
        if "residue" not in kinds:
            continue
        res = labels[v].of_kind("residue")
        colours[v] = residue_label_colour(labels[v])
        places += hidden_places(v, kinds["residue"], res, numbers)
    views_of = read_views(labels)
    chosen = chosen_texts(places, views_of, numbers)
    found: dict[str, set[str]] = {}
    for k, text in chosen.items():
        found.setdefault(text, set()).add(places[k].view)
    extra: dict[str, list[LabelRead]] = {}
    scores = {k: dict(places[k].options)[text] for k, text in chosen.items()}
    for k in sorted(chosen, key=lambda k: -scores[k]):
        text, v = chosen[k], places[k].view
        read_in = views_of.get(text, set())
        if len(read_in | found[text]) < min_views + (not read_in):
            continue
        lab = place_label(sp[v]["residue"], places[k], text, colours[v])
        if any(_overlap(lab.box, o.box) for o in extra.get(v, [])):
            continue
        extra.setdefault(v, []).append(lab)
    out = dict(labels)
    for v, labs in extra.items():
        out[v] = replace(labels[v], labels=labels[v].labels + tuple(labs))
    return out


# ----------------------------------------------------------------------------- sub-pixel label centres

REFINE_REACH = 3  # px: how far from its box a residue label's whole text is sought again


def text_template(spotter: Spotter, text: str) -> np.ndarray | None:
    """The whole ``text`` drawn rigidly from the item's glyph templates at their measured steps (:meth:`Spotter.layout`):
    one template instead of glyphs that may each slide, so its correlation peak is sharp. None if a glyph is unknown."""
    text = str(text).upper().strip()
    if not text or not spotter.t.can_spell(text):
        return None
    lay = spotter.layout(text)
    hh, ww = spotter.extent(lay)
    out = np.zeros((hh, ww), np.float32)
    for ch, x, y in lay:
        g = spotter.t.glyphs[ch]
        out[y:y + g.shape[0], x:x + g.shape[1]] = np.maximum(out[y:y + g.shape[0], x:x + g.shape[1]], g)
    return out


def _vertex(a: float, b: float, c: float) -> float:
    """Offset (−0.5..0.5) of the top of the parabola through three equally spaced values, b the largest."""
    den = a - 2.0 * b + c
    return 0.0 if den >= 0 else float(np.clip(0.5 * (a - c) / den, -0.5, 0.5))


def refined_centre(spotter: Spotter, text: str, centre: Sequence[float], reach: int = REFINE_REACH
                   ) -> tuple[float, float] | None:
    """The centre of ``text`` drawn near ``centre`` (px), to a fraction of a pixel: the peak of the whole text's
    rigid template (:func:`text_template`) correlated within ``reach`` px, refined by a parabola through its
    neighbours. None where the text does not fit or the peak lies at the edge of the search.

    Why: a box from the reader's glyph components is whole pixels and stretches where another label touches it, and a
    spotted label's glyphs may each slide; the consecutive residue-label ruler needs each label's place to a fraction
    of a pixel (a 1 Å zooming bin is 1 % of the camera distance). At 384 px PyMOL, against the projected CA: box
    centres of read labels ±0.55 px (x, SD), of spotted ones ±1.3 px; refined, ±0.47 px for either
    (``eval/results/zoom_scale.md``)."""
    tpl = text_template(spotter, text)
    if tpl is None:
        return None
    hh, ww = tpl.shape
    x0 = int(round(centre[0] - ww / 2.0)) - reach
    y0 = int(round(centre[1] - hh / 2.0)) - reach
    H, W = spotter.alpha.shape
    if x0 < 0 or y0 < 0 or x0 + ww + 2 * reach > W or y0 + hh + 2 * reach > H:
        return None
    m = ncc_map(spotter.alpha[y0:y0 + hh + 2 * reach, x0:x0 + ww + 2 * reach], tpl)
    i, j = np.unravel_index(int(np.argmax(m)), m.shape)
    if not (0 < i < m.shape[0] - 1 and 0 < j < m.shape[1] - 1):
        return None
    return (x0 + j + _vertex(m[i, j - 1], m[i, j], m[i, j + 1]) + ww / 2.0,
            y0 + i + _vertex(m[i - 1, j], m[i, j], m[i + 1, j]) + hh / 2.0)


def with_refined_residue_centres(images: Mapping[str, Any], labels: Mapping[str, ImageLabels],
                                 sp: Mapping[str, Mapping[str, Spotter]] | None = None) -> dict[str, ImageLabels]:
    """``labels`` with every residue label whose text the item's glyphs spell given its sub-pixel centre
    (:func:`refined_centre`, in :attr:`LabelRead.at`); the others keep their box centres. What zooming's residue-label
    ruler triangulates (:func:`misi_agent.tools.image_tasks._zoom_labels`; the rulers of T7, T8 and T9, which need the
    distance within about 2 %, not 1 %, keep the box centres: not measured with these). ``sp``: the item's
    :func:`spotters`, where the caller made them already (those of the labels read are those of the labels with the
    hidden ones added: a spotted glyph is never a template sample)."""
    sp = sp if sp is not None else spotters(images, labels)
    out = dict(labels)
    for v, il in labels.items():
        spotter = sp.get(v, {}).get("residue")
        if spotter is None:
            continue
        labs = []
        for lab in il.labels:
            at = refined_centre(spotter, lab.reading, lab.centre) if lab.kind == "residue" and lab.reading else None
            labs.append(replace(lab, at=at) if at is not None else lab)
        out[v] = replace(il, labels=tuple(labs))
    return out
