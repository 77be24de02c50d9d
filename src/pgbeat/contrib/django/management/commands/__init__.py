"""``manage.py pgbeat_worker``."""
