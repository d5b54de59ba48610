"""Kafka: topics, the outbox and publishing after commit, the services' consumer and its
offset commits, batch consumption, the validating edge, the service skeleton and AsyncAPI;
the local broker's tuning in `local_broker/`.
"""
