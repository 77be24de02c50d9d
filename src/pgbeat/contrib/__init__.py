"""Integrations with application frameworks; each imports its framework, so import it only there."""
