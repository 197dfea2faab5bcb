"""Claims: what a study's paper says about its numbers, stated in the spec (``claims:``) and checked
against the study dataset (:mod:`ntkpipe.claims.evaluate`). Each relation a claim may use is a record
of :data:`ntkpipe.claims.relations.RELATIONS`."""
