# etcd for the cluster compose (deploy/cluster/docker-compose.yml): Debian bookworm's
# etcd-server package (etcd 3.4) on a debootstrap base, no registry.
#
# Built by deploy/docker/build-etcd-image.sh (docs/containers.md), which makes the base
# `muster-etcd-base:bookworm` with debootstrap and runs
#
#   docker build --build-arg BASE_IMAGE=muster-etcd-base:bookworm -t muster-etcd:local \
#       -f deploy/docker/etcd.Dockerfile target/image-etcd
#
# The build context is empty: everything comes from the base. One member on its own:
#
#   docker run -p 2379:2379 -v etcd-data:/var/lib/etcd muster-etcd:local
#
# A member of a cluster gets its name, advertised URLs and initial cluster from ETCD_*
# variables (etcd reads every flag from ETCD_<FLAG>), as the compose file sets them.
ARG BASE_IMAGE=muster-etcd-base:bookworm
FROM ${BASE_IMAGE}

# The package's system user `etcd` owns /var/lib/etcd (mode 0700, as etcd wants its data
# directory); a named volume mounted there starts with that owner and mode.
USER etcd
VOLUME ["/var/lib/etcd"]
EXPOSE 2379 2380
# Clients and peers on every address of the container; the advertised URLs and the initial
# cluster default to one member on 127.0.0.1 (right for `docker run` alone; not `localhost`,
# which etcd resolves and then finds differing from the initial cluster's) and are set per
# member in a compose file. Periodic
# compaction keeps etcd's history from filling its quota (docs/cluster.md, "Limits").
ENV ETCD_DATA_DIR=/var/lib/etcd \
    ETCD_LISTEN_CLIENT_URLS=http://0.0.0.0:2379 \
    ETCD_ADVERTISE_CLIENT_URLS=http://127.0.0.1:2379 \
    ETCD_LISTEN_PEER_URLS=http://0.0.0.0:2380 \
    ETCD_INITIAL_ADVERTISE_PEER_URLS=http://127.0.0.1:2380 \
    ETCD_INITIAL_CLUSTER=default=http://127.0.0.1:2380 \
    ETCD_AUTO_COMPACTION_RETENTION=1h
# /health answers 200 only while the member sees a leader.
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 \
    CMD curl -fsS http://127.0.0.1:2379/health || exit 1
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/etcd"]
