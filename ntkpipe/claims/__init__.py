"""Claims in the language: what a study's paper says about its numbers, stated in the spec (``claims:``):
the quantity, tolerance and relation records (:mod:`ntkpipe.claims.record`), and each relation a claim may
use as a record of :data:`ntkpipe.claims.relations.RELATIONS`. Below the language; they are checked
against a study dataset by :mod:`ntkpipe.verdicts`."""
