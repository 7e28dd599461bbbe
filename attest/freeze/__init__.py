"""freeze layer (see DESIGN.md "Layers")."""
