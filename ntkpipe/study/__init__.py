"""Studies: load and validate a spec against the registries (architectures, stages, measurements,
data files), then plan its jobs. Sits above ``spec``, ``data``, ``measure`` and ``stages``.

Import the submodules directly (``ntkpipe.study.load``, ``ntkpipe.study.plan``); the package's
public names are re-exported from :mod:`ntkpipe`.
"""

DEFAULT_VARIANT = "default"
"""The variant a spec is when none is named."""
SPEC_SUFFIX = ".yaml"
"""The suffix of a spec file (here, without importing validation, for the Snakefile's listing of specs)."""
