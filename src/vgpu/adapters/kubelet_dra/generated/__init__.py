"""Protobuf and gRPC stubs for the kubelet's DRA plugin, registration and health APIs."""
