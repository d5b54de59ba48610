"""MCP servers as tool sources (ADR 0038): configuration and naming (`config`), one
supervised connection per server (`connection`), and the process's tools (`pool`)."""
