"""The offline evaluation lab: baselines, re-rankers fitted on offline examples, the two-stage
comparison with its paired bootstrap, the session Transformer's per-dataset recipe and the
offline reference answer a served list is held to (docs/architecture.md, "Production and lab").

Nothing that serves or trains imports this package (an import-linter contract in
pyproject.toml); it imports the production modules of :mod:`models` to evaluate them.
"""
