# pgbeat's image: the CLI, the bundled demo, and the repository's schedules.toml.
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && useradd --create-home --uid 10001 pgbeat
COPY schedules.toml ./

USER pgbeat
# Time zones from the pinned tzdata package only, so every replica computes the same
# fire times and unique keys whatever the host image ships (see docs/dst.md).
ENV PYTHONTZPATH=""
ENTRYPOINT ["pgbeat"]
CMD ["--help"]
