"""The study language, the bottom layer of ntkpipe: the schema, YAML reading with line numbers,
sweep grammar and axes, and content identity. It imports nothing else of ntkpipe; validation
against registries and planning live above it, in :mod:`ntkpipe.study`.
"""
