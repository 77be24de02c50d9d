"""Django management commands of pgbeat."""
