"""The local broker's (Tansu's) tuning, one adapter: `tuning` (the switch: on only when
`MUSTER_LOCAL_BROKER` says the broker is Tansu, off with a real Kafka), `fetching` (the
consumer: adaptive fetch wait, or fetches gated on a bell), `bell_fetching` and `bells`
(the rings), and `aiokafka_hooks` (the only code that touches aiokafka's internals; ADR
0035).
"""
