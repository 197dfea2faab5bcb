"""Verdicts: a study's claims (the language's :mod:`ntkpipe.claims`) checked against its dataset --
the quantity each reads (:mod:`~ntkpipe.verdicts.quantity`), the relation's outcome and the claims
store and table (:mod:`~ntkpipe.verdicts.evaluate`), their rendering in the terminal and Markdown
(:mod:`~ntkpipe.verdicts.render`); the claims of many studies read back from results are
(:mod:`~ntkpipe.fidelity`). Above the language: it reads datasets and plans."""
