# One image for every vgpu process: `vgpu scheduler`, `vgpu device-plugin`, `vgpu simulate`.
#   docker build -t vgpu:0.1.0 .
# The chart runs the scheduler as this image's user (65532) and the device plugin as root,
# which it needs for the kubelet's device-plugin directory (charts/vgpu, docs/install.md).
#
# Reproducible: the base image is pinned by digest (the multi-platform index of
# python:3.11.15-slim-bookworm), and every Python package comes from image-requirements.txt
# at the version it names (scripts/lock_image.py writes it from pyproject.toml); nothing is
# resolved at build time.

ARG PYTHON_IMAGE=python:3.11.15-slim-bookworm@sha256:d29f48a31a8b408ed19272ca1e7b10ebae13b240a27e862d3d4217c528e2e0c3

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/vgpu
COPY image-requirements.txt ./
RUN /opt/vgpu/bin/pip install --no-deps --requirement image-requirements.txt
COPY pyproject.toml README.md ./
COPY src ./src
# the lock holds vgpu's dependencies with the cluster extra (every process runs from this image),
# not matplotlib (vgpu[simulate]), which only draws `vgpu simulate --report` plots; the build
# tools (setuptools, wheel) leave once vgpu is built
RUN /opt/vgpu/bin/pip install --no-deps --no-build-isolation . \
    && /opt/vgpu/bin/pip uninstall --yes setuptools wheel \
    && /opt/vgpu/bin/pip check \
    && /opt/vgpu/bin/vgpu --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="vgpu" \
      org.opencontainers.image.description="GPU sharing for Kubernetes, wire-compatible with HAMi" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/vgpu/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /opt/vgpu /opt/vgpu
USER 65532:65532
ENTRYPOINT ["vgpu"]
CMD ["--help"]
