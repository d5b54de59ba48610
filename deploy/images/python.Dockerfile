# Stand-in for python:3.11-slim: Debian bookworm's Python 3.11 with pip and venv.
ARG BASE_IMAGE=muster-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-pip python3-venv \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s /usr/bin/python3 /usr/local/bin/python
# The official image's pip installs into its own prefix; Debian's refuses (PEP 668) unless told.
# uv reads its roots from SSL_CERT_FILE: the system store, with any CA the base was given.
ENV PIP_BREAK_SYSTEM_PACKAGES=1 LANG=C.UTF-8 SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
CMD ["python3"]
