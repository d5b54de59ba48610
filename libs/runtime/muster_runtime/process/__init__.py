"""The process platform: settings, database pools, tracing, logs, the event loop, the garbage
collector's tuning, retry policies and API tokens.
"""
