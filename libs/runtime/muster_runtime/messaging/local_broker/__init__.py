"""The local broker's (Tansu's) tuning: fetch bells and the adaptive fetch wait. Off when
KAFKA_BOOTSTRAP_SERVERS points at a real Kafka.
"""
