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
piles (names spotted, numbers fitted among those worth trying): 98 % of what it adds names a residue of the item on
both renderers. T9 (:func:`misi_agent.tools.image_hbonds.pocket_hbonds_from_images`) uses it since the ligand's hidden
atoms are placed from their labels and the dictionary: fresh runs of 20 items, PyMOL 10.40 → 11.23, raster
53.19 → 53.70 (it moved no score while the ligand limited PyMOL's T9); measurements in
``eval/results/label_spotting.md``.
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
        lead = self.lead.get(a, float(np.median(list(self.lead.values()))))
        trail = self.trail.get(b, float(np.median(list(self.trail.values()))))
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
        H, W = self.alpha.shape
        hh = max(y + self.t.glyphs[ch].shape[0] for ch, _, y in lay)
        ww = max(x + self.t.glyphs[ch].shape[1] for ch, x, _ in lay)
        if hh > H or ww > W:
            return []
        oh, ow = H - hh + 1, W - ww + 1
        score = np.zeros((oh, ow), np.float32)
        for ch, x, y in lay:
            score += self._map(ch)[y:y + oh, x:x + ow]
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

    def score_at(self, lay: list[tuple[str, int, int]], i: int, j: int) -> float:
        """Mean glyph correlation of the text laid out as ``lay`` (:meth:`layout`) with its top-left at (i, j)."""
        return float(np.mean([self._value(ch, i + y, j + x) for ch, x, y in lay]))

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


def _glyph(ch: str, box: tuple[int, int, int, int]) -> Glyph:
    p = np.full(len(ALPHABET), (1.0 - SPOTTED_PROB) / (len(ALPHABET) - 1), np.float32)
    p[ALPHABET.index(ch)] = SPOTTED_PROB
    return Glyph(box, p)


def hidden_residue_labels(spotter: Spotter, read: Sequence[LabelRead], colour: int, numbers: Collection[int]
                          ) -> list[LabelRead]:
    """Residue labels the reader missed: every residue name spotted where no read label lies, completed with the
    number among ``numbers`` that fits best behind it (every digit its place's best template, nothing after it, the
    text's mean correlation at least :data:`MIN_SCORE`). A number that begins another one worth trying is left
    out: the rest of it may lie under another label (PyMOL's ``ASP 40`` spotted as ``ASP 4``). Each is a
    :class:`LabelRead` of kind ``residue`` whose glyphs carry :data:`SPOTTED_PROB` on the character found.

    ``numbers`` are the residue numbers worth trying: pocket residues come in runs along the chain, so the numbers
    read in the item's views and their near neighbours (:func:`nearby_numbers`) hold nearly every hidden one."""
    t = spotter.t
    if t.space is None:
        return []
    texts = [str(n) for n in sorted(set(numbers)) if n >= 0 and all(d in t.glyphs for d in str(n))]
    spotter.prepare()
    taken = [lab.box for lab in read]
    out: list[LabelRead] = []
    for name in STANDARD_RESIDUES:
        if not t.can_spell(name):
            continue
        for spot in spotter.spot(name, max_spots=12, check_end=False):
            i, j = spot.box[1], spot.box[0]
            if any(_overlap(spot.box, b) for b in taken):
                continue
            best = None
            for num in texts:
                text = f"{name} {num}"
                lay = spotter.layout(text)
                score = spotter.score_at(lay, i, j)
                if score < MIN_SCORE or (best is not None and score <= best[0]):
                    continue
                if spotter.passes(lay, i, j):
                    best = (score, text, lay)
            if best is None:
                continue
            _, text, lay = best
            num = text.split()[1]
            if any(o != num and o.startswith(num) for o in texts):  # its end may be hidden: ASP 4 for ASP 40
                continue
            glyphs = [_glyph(ch, (j + x, i + y, j + x + t.glyphs[ch].shape[1], i + y + t.glyphs[ch].shape[0]))
                      for ch, x, y in lay]
            box = (min(g.box[0] for g in glyphs), min(g.box[1] for g in glyphs), max(g.box[2] for g in glyphs),
                   max(g.box[3] for g in glyphs))
            taken.append(box)
            out.append(LabelRead((tuple(glyphs[:3]), tuple(glyphs[3:])), box, colour, "residue", text))
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
                               min_views: int = HIDDEN_MIN_VIEWS) -> dict[str, ImageLabels]:
    """``labels`` with, in every view, the residue labels :func:`hidden_residue_labels` finds added; a text so found
    is kept only where it is read or found in at least ``min_views`` views in all (a label is drawn in every view,
    a misfit of the templates seldom twice)."""
    sp = spotters(images, labels)
    numbers = nearby_numbers(labels)
    extra: dict[str, list[LabelRead]] = {}
    for v, kinds in sp.items():
        if "residue" not in kinds:
            continue
        res = labels[v].of_kind("residue")
        colour = max(set(lab.colour for lab in res), key=[lab.colour for lab in res].count)
        extra[v] = hidden_residue_labels(kinds["residue"], res, colour, numbers)
    views_of: dict[str, set[str]] = {}
    for v, labs in labels.items():
        for lab in labs.of_kind("residue"):
            views_of.setdefault(lab.text, set()).add(v)
    for v, labs in extra.items():
        for lab in labs:
            views_of.setdefault(lab.text, set()).add(v)
    out = dict(labels)
    for v, labs in extra.items():
        keep = tuple(lab for lab in labs if len(views_of[lab.text]) >= min_views)
        if keep:
            out[v] = replace(labels[v], labels=labels[v].labels + keep)
    return out
