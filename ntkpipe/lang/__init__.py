"""The study language: the schema, YAML reading with line numbers, sweep grammar and axes, and content
identity. The schema's ``data:`` section is composed of the data sources' records
(:mod:`ntkpipe.data.sources`, which build only on :mod:`ntkpipe.strict`); besides them it imports only
:mod:`ntkpipe.activations`. Validation against the other registries and planning live above it, in
:mod:`ntkpipe.study`.
"""
