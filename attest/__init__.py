"""attest: reproducible builds and attestations of closed trees.

Layers (each may use the ones above it): ``inventory`` -> ``git`` -> ``attestation`` ->
``freeze`` -> ``build`` -> ``review``; ``cli`` renders. See README.md "Layout" and docs/.
"""

__version__ = "0.1.0"
