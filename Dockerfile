# pgbeat's image: the CLI, the bundled demo, and the repository's schedules.toml.
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . && useradd --create-home --uid 10001 pgbeat
COPY schedules.toml ./

USER pgbeat
ENTRYPOINT ["pgbeat"]
CMD ["--help"]
