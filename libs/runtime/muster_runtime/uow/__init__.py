"""The unit of work (one decision, one transaction) and its two implementations, PostgreSQL and
in memory, with what they keep: leases, processed messages, coalesced claims.
"""
