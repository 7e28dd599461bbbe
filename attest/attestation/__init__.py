"""attestation layer (see DESIGN.md "Layers")."""
