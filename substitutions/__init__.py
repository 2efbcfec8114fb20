"""taso.substitutions: the rule engine used at optimize time, and the rule generator.

The engine (this folder): `rule` (rules as data, the constraint language and its one
`evaluate_expression`), `matching` (the public face: `find_matches`, `apply`) over the
private `_pattern`, `_matcher`, `_apply`, `_bridge`, `_emit` and `_constraints`, and the
shipped rules in `library/`. The generator and prover live in `generate/` (the `taso-gen`
CLI); it may import the engine, the engine never imports it.
"""
