"""The study language: schema, loading with line-numbered errors, sweeps, identity, planning.

Import the submodules directly (``ntkpipe.spec.load``, ``ntkpipe.spec.plan``); the package's public
names are re-exported from :mod:`ntkpipe`.
"""
