# velashard controller image: `velashard` is the entrypoint, so container args are just flags
# (--enable-sharding --shard-id=master, ...), as in KubeVela's chart and addon.
FROM python:3.11-slim AS build
WORKDIR /src
COPY setup.py README.md ./
COPY velashard ./velashard
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin velashard
COPY --from=build /wheels /wheels
# Compiled at build time: the runtime user cannot write site-packages, so without .pyc files every start (a
# shard's restart, a failover) would compile all of velashard and its dependencies again.
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
COPY addons /opt/velashard/addons
ENV VELASHARD_ADDONS_DIR=/opt/velashard/addons
USER 65532:65532
EXPOSE 8080 9440 9443
ENTRYPOINT ["velashard"]
