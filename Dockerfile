# syntax=docker/dockerfile:1
# One image for the k8slease operator and the demo app that ships in the package:
#   docker build -t k8slease:0.1.0 .
#   operator:     python -m k8slease operator ...   (the default command)
#   demo app:     python -m k8slease.cli.demoapp.billing_app
#
# The base is pinned by exact version and Debian release: the same CPython the project is tested
# with. To pin it harder, append the digest that your registry reports for this tag, e.g.
#   docker buildx imagetools inspect python:3.11.7-slim-bookworm
#   docker build --build-arg PYTHON_IMAGE=python:3.11.7-slim-bookworm@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.11.7-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# k8slease/operator/crd.yaml is a symlink into charts/k8slease/crds/: keep both paths.
COPY pyproject.toml README.md constraints.txt ./
COPY charts/k8slease/crds/ charts/k8slease/crds/
COPY k8slease/ k8slease/
# The core and the operator extra (no testing or dev extras), at the exact versions of
# constraints.txt, into a virtualenv the final stage copies whole.
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --constraint constraints.txt ".[operator]" \
    && /opt/venv/bin/python -c "import k8slease, kopf, kubernetes"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="k8slease" \
      org.opencontainers.image.description="k8slease operator and example app" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A fixed numeric user, so Kubernetes can verify runAsNonRoot (the chart runs as 10001 too).
RUN groupadd --system --gid 10001 k8slease \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin k8slease
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["python", "-m", "k8slease"]
CMD ["operator", "--standalone", "--liveness=http://0.0.0.0:8080/healthz"]
