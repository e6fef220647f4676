"""Rule catalog."""
