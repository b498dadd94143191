# One image for every vgpu process: `vgpu scheduler`, `vgpu device-plugin`, `vgpu simulate`.
#   docker build -t vgpu:0.1.0 .
# The chart runs the scheduler as this image's user (65532) and the device plugin as root,
# which it needs for the kubelet's device-plugin directory (charts/vgpu, docs/install.md).

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/vgpu
COPY pyproject.toml README.md ./
COPY src ./src
# no extras: matplotlib (vgpu[simulate]) only draws `vgpu simulate --report` plots
RUN /opt/vgpu/bin/pip install . \
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
