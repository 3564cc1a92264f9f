"""The service shell: the HTTP app of the bridge contract, the WSGI server, the command line, start-up
configuration and metrics."""
