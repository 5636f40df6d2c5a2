"""The runtime: tool registry and host modules, the tool pipeline, policies, stores."""
