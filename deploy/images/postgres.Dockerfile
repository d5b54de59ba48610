# Stand-in for postgres:16: Debian bookworm's PostgreSQL 15, with the official image's
# interface (POSTGRES_USER / POSTGRES_PASSWORD / POSTGRES_DB, PGDATA, port 5432, pg_isready).
ARG BASE_IMAGE=muster-base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data LANG=C.UTF-8
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
USER postgres
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]
