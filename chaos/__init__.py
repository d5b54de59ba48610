"""Chaos driver: a private `muster run`, a seeded scripted workload, seeded SIGKILLs, and
the DESIGN §6 invariants checked from the database afterwards (`python -m chaos.run`)."""
