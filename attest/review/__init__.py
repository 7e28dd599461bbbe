"""review layer (see DESIGN.md "Layers")."""
