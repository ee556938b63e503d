# Stand-in for the official postgres image, for machines that cannot pull from the public image
# hub: Debian bookworm's PostgreSQL, initialised on first start from POSTGRES_USER,
# POSTGRES_PASSWORD and POSTGRES_DB like the official image, data in /var/lib/postgresql/data.
# Built by tests/docker/base_images.py on top of the Debian stand-in.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql \
    && ln -s /usr/lib/postgresql/*/bin /usr/local/lib/postgresql-bin
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/local/lib/postgresql-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PGDATA=/var/lib/postgresql/data
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
# Fast shutdown, as the official image.
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
