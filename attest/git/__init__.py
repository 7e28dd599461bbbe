"""git layer (see DESIGN.md "Layers")."""
