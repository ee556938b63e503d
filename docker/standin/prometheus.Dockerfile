# Stand-in for prom/prometheus, for machines that cannot pull it: Debian bookworm's Prometheus
# (and promtool) laid out like the official image: /bin/prometheus as the entry point, the
# configuration in /etc/prometheus, the data in /prometheus, running as nobody.
# Built by tests/docker/base_images.py on top of the Debian stand-in.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends prometheus \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus \
    && chown 65534:65534 /prometheus
USER 65534:65534
WORKDIR /prometheus
EXPOSE 9090
ENTRYPOINT ["/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
