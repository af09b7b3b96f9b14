"""HTTP routers, one module per API surface."""
