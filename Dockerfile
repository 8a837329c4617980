# The operator's image: the package and its runtime dependencies in a virtualenv on a Python base,
# running as a non-root user.
#
# BASE is any image with python3 (3.11+) and its venv module. The public build uses the official
# python:3.11-slim; the local cluster builds this same file with buildah on a base bootstrapped from
# Debian's packages (hack/build-images.sh: --build-arg BASE=localhost/sampledb/python:3.11-bookworm).
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN python3 -m venv /opt/sampledb-operator \
 && /opt/sampledb-operator/bin/pip install --no-cache-dir --no-compile . \
 && /opt/sampledb-operator/bin/python -m compileall -q /opt/sampledb-operator/lib

FROM ${BASE}
COPY --from=build /opt/sampledb-operator /opt/sampledb-operator
USER 65532:65532
ENV PATH=/opt/sampledb-operator/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
EXPOSE 8080 8081
ENTRYPOINT ["sampledb-operator"]
CMD ["run"]
