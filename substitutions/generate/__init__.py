"""taso.substitutions.generate: make and prove the rule library (`taso-gen`); never used at optimize time.

    cli               `taso-gen` ops | check-axioms | generate | verify | merge
    _pipeline         `taso-gen generate`: enumerate, fingerprint, pair, prune, prove, witness, write
    _universes        the typed input sets enumerated over
    _enumerate        every graph of up to K operators over a universe, in canonical order
    _fingerprint      exact evaluation modulo a prime (equal fingerprints = candidate pairs)
    _pairs            candidate pairs from fingerprint classes, pruned, in rounds by size
    _prune            TASO's pruning steps (renaming, leaf merging, common sub/supergraph)
    _implied          pruning of pairs that smaller proved rules already imply
    _pair_rules       a proved pair as a `Rule`, generalized to parametric where provable
    _prove            Z3 proofs from the axiom bank
    _axiom_bank       the axioms as Z3 formulas over uninterpreted operators
    _axiom_rules      rules read directly off the axioms
    _axiom_families   axioms whose rules need a parameter computed at match time
    _converter_forms  the shapes converters emit, as axioms to prove rules from
    _converter_rules  those forms as proved, witnessed rules
    _witness          numeric witness: source and target on random tensors
    _verify           `taso-gen verify`: re-prove and re-witness a rule file
    _merge            `taso-gen merge`: one shipped library from several runs

It imports the engine (`taso.substitutions.rule`, ...); the engine imports nothing from here.
"""
