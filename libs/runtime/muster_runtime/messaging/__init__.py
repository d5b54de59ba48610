"""Kafka: topics, the outbox and publishing after commit, batch consumption and offset commits,
the validating edge, the service skeleton and AsyncAPI.
"""
