"""What a running process tells the outside: heartbeats, Prometheus metrics, log lines."""
