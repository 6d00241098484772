# syntax=docker/dockerfile:1
# The platform-streams worker image: `platform-streams` as the entrypoint, run as a non-root
# user (UID/GID 10001, the chart's runAsUser/fsGroup), with the example application installed
# so that `platform-streams run examples.orders_app:topology` works out of the box.
#
#   docker build -t platform-streams:0.1.0 .
#   docker run --rm platform-streams:0.1.0 describe examples.orders_app:topology
#
# Your own application: build FROM this image, COPY your package into /app (the working
# directory is importable) or `pip install` it, and set the chart's app.factory.

# ---- build: install the package and its dependencies into a virtualenv ------------------
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Dependency wheels (confluent-kafka, rocksdict, ...) are manylinux builds: no compiler.
COPY pyproject.toml README.md ./
COPY platform_streams ./platform_streams
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir .

# ---- runtime ------------------------------------------------------------------------------
FROM python:3.11-slim

LABEL org.opencontainers.image.title="platform-streams" \
      org.opencontainers.image.description="Kafka Streams, rebuilt in Python: stream application worker" \
      org.opencontainers.image.licenses="Apache-2.0"

RUN groupadd --system --gid 10001 streams \
    && useradd --system --uid 10001 --gid streams --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin streams

COPY --from=build /opt/venv /opt/venv

# Bytecode is compiled at install time; nothing is written under the (read-only) root.
ENV PATH="/opt/venv/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1

# Your application's modules go here (the working directory is importable by `run`). The
# example application is not part of the wheel: it is copied here, like yours would be.
WORKDIR /app
COPY examples ./examples

USER 10001:10001

# The worker HTTP endpoint (/metrics, /health/*, /state, queries): set http_port to serve it.
EXPOSE 8080

ENTRYPOINT ["platform-streams"]
CMD ["--help"]
