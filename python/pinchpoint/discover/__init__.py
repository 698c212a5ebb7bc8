"""`pinchpoint init`: a plan written from the running stack, following the request from a
URL down through the processes that serve it on this host."""
