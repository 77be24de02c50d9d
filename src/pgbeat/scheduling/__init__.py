"""Schedules: fire times and the DST policy (pure), the schedules file, the scheduler loop."""
