"""The live service: REST API, durable store and the scheduler loop (see docs/service.md)."""
