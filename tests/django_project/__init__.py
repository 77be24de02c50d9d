"""A minimal Django project (psycopg 3 backend) that uses pgbeat.contrib.django, for the tests."""
