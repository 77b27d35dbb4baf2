# musterd, the Muster coordinator, plus the `muster` CLI and the example worker.
#
#   docker build -t muster:local .
#   docker run -p 7450:7450 -p 7451:7451 -v muster-data:/data muster:local
#
# Build stage: the official Rust image; --locked builds exactly the Cargo.lock versions.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked \
        -p muster-server --bin musterd \
        -p muster-cli --bin muster \
        -p muster-client --example worker \
    && mkdir -p /out \
    && cp target/release/musterd target/release/muster target/release/examples/worker /out/

# Run stage: a small Debian base, a non-root user, state on the /data volume.
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home muster \
    && mkdir -p /data \
    && chown muster:muster /data
COPY --from=build /out/ /usr/local/bin/
USER muster
VOLUME ["/data"]
EXPOSE 7450 7451
ENV MUSTER_LISTEN=0.0.0.0:7450 \
    MUSTER_ADMIN_LISTEN=0.0.0.0:7451 \
    MUSTER_DATA_DIR=/data \
    MUSTER_LOG_FORMAT=json
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD curl -fsS http://127.0.0.1:7451/readyz || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/musterd"]
