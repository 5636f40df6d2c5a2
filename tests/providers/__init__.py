"""Fake provider servers on 127.0.0.1 that speak each provider's wire format."""
