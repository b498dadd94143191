"""Use cases, configuration, wiring (composition roots), HTTP, gRPC services and the CLI."""
