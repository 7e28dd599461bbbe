"""review layer: the trusted bootstrap, the review step from the handoff, review-evidence trust (README.md "Layout")."""
