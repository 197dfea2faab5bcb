"""Labels as a reader sees them: the sub- and superscript markup of the variables' records
(``φ_j``, ``K_V^{c,c}``, ``‖K‖_F``, ``w_min``) rendered as matplotlib mathtext, word by word.

A word is math when it has markup after a symbol -- ``_`` or ``^`` after a single letter, a Greek
letter, a closing bracket or bar, or a math function name (``argmax_i``) -- and is then written
between ``$``. A script is braced (``K_V^{c,c}``), a run of Latin letters -- upright when there
are several (``w_min`` → ``$w_{\\mathrm{min}}$``, ``K_Vŷ`` → ``$K_Vŷ$``) --, a run of digits
(``α_10``) or one symbol (``λ_β``). An identifier (``model_case``) is no
math: it is a name, and figures show display names (:func:`ntkpipe.labels.display_name`), so
:func:`raw_markup` reports it. A text that already has ``$`` is left as its author wrote it."""

from __future__ import annotations

import re
from functools import lru_cache

FUNCTIONS = ("argmax", "argmin", "max", "min", "tr", "cos", "log", "exp")
_BASE = r"(?:(?<![A-Za-z])[A-Za-z]|[^\W\d_A-Za-z]|[)\]}|‖²³ᵀ]|\b(?:" + "|".join(FUNCTIONS) + "))"
MARKUP = re.compile(_BASE + r"[_^]")
"""Sub- or superscript markup after a symbol: what makes a word math."""
_SCRIPT = re.compile(r"([_^])(\{[^{}]*\}|[A-Za-z]+|[0-9]+|[^\s{}_^$])")
_FUNCTION = re.compile(r"\b(" + "|".join(FUNCTIONS) + r")(?=[_^(])")
_SPECIAL = str.maketrans({"%": r"\%", "#": r"\#", "&": r"\&", "~": r"\sim "})


def as_math(text: str) -> str:
    """``text`` with every math word (module docstring) written as mathtext."""
    if "$" in text or not MARKUP.search(text):
        return text
    return "\n".join(" ".join(_word(w) if MARKUP.search(w) else w for w in line.split(" "))
                     for line in text.split("\n"))


def _word(word: str) -> str:
    """One math word as ``$…$`` (no spaces inside, so wrapping at spaces never splits it); punctuation
    that ends it (``‖K‖_F:`` before a note, ``y_d,``) stays text, not a math operator."""
    stem = word.rstrip(",:;.")
    body = _FUNCTION.sub(r"\\mathrm{\1}", stem.translate(_SPECIAL))
    return "$" + _SCRIPT.sub(lambda m: m.group(1) + _script(m.group(2)), body) + "$" + word[len(stem):]


def _script(script: str) -> str:
    """A sub- or superscript: one character as it is, several braced, letters upright."""
    if script.startswith("{") or len(script) == 1:
        return script
    return "{\\mathrm{" + script + "}}" if script.isalpha() and script.isascii() else "{" + script + "}"


def raw_markup(text: str) -> list[str]:
    """The words of ``text`` outside ``$…$`` that a reader would see as markup: ``_``, ``^``, braces."""
    plain = re.sub(r"(?<!\\)\$[^$]*(?<!\\)\$", " ", text)
    return [w for w in plain.split() if re.search(r"[_^{}]", w)]


@lru_cache(maxsize=4096)
def math_error(text: str) -> str | None:
    """Why matplotlib cannot render the mathtext of ``text`` (None when it can, or has none); each
    line on its own, as :class:`matplotlib.text.Text` draws them."""
    from matplotlib.mathtext import MathTextParser

    for line in text.split("\n"):
        if line.count("$") - line.count(r"\$") < 2:
            continue
        try:
            MathTextParser("path").parse(line)
        except ValueError as err:
            return " ".join(str(err).split())
    return None
