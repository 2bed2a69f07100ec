"""Scoring: the evaluation protocol (:mod:`.protocol`), benchmark sets (:mod:`.datasets`), runs (:mod:`.evaluate`)."""
