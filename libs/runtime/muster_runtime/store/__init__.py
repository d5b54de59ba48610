"""The log of record: the append-only event store with its projector, the migrations that
install it, lineage ids and the projection rebuild.
"""
