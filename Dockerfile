# The operator's image: the package and its runtime dependencies on a slim Python base, non-root.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
USER 65532:65532
ENV PYTHONUNBUFFERED=1
EXPOSE 8080 8081
ENTRYPOINT ["sampledb-operator"]
CMD ["run"]
