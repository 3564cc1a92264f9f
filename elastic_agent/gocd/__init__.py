"""GoCD's side: the request bodies it sends, the calls back to it, its health messages, the lines written
to job consoles, and the status pages it shows."""
