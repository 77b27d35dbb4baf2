# musterd, the Muster coordinator, plus the `muster` CLI and the example worker.
#
# Built by deploy/docker/build-image.sh (docs/containers.md), which needs no image registry:
# it makes the base image from Debian's packages with debootstrap, builds the binaries on the
# host with cargo (--release --locked), stages them in target/image/bin/ and runs
#
#   docker build --build-arg BASE_IMAGE=muster-base:bookworm -t muster:local \
#       -f Dockerfile target/image
#
# The build context is target/image/ alone: bin/musterd, bin/muster, bin/worker.
#
#   docker run -p 7450:7450 -p 7451:7451 -v muster-data:/data muster:local
ARG BASE_IMAGE=muster-base:bookworm
FROM ${BASE_IMAGE}

# A non-root user owning the state directory. Before the binaries, so that a new build of
# them reuses this layer.
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin muster \
    && mkdir -p /data \
    && chown muster:muster /data
COPY bin/musterd bin/muster bin/worker /usr/local/bin/
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
