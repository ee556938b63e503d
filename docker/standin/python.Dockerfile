# Stand-in for python:3.11-slim-bookworm, for machines that cannot pull from the public image
# hub: Debian bookworm (its Python is 3.11) from a debootstrap root file system, with a venv at
# /usr/local so `python` and `pip` behave as in the official image. Built by
# tests/docker/base_images.py; ca-certificates/ holds the host's locally added CA certificates
# (it may be empty).
ARG ROOTFS_IMAGE
FROM ${ROOTFS_IMAGE}
COPY ca-certificates/ /usr/local/share/ca-certificates/
RUN update-ca-certificates \
    && python3 -m venv /usr/local \
    && rm -f /usr/local/pyvenv.cfg.bak
ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt
CMD ["python3"]
