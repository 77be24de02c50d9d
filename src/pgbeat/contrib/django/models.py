"""No models: pgbeat's tables are its own (see apps.py). The module's presence makes Django
send this app the ``post_migrate`` signal that applies them."""
