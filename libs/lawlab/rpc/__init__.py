"""gRPC plumbing shared by every service: servers, interceptors, clients."""
