"""PostgreSQL: connections and reconnect backoff, every SQL statement, and migrations."""
