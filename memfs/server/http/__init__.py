"""The HTTP layer every API of the reference server shares, knowing none of their routes (the
gatekeeper's own paths aside: open, admin, console): the outer middleware, keys and actors,
request bodies and query parameters, page cursors, the error envelope, the change streams'
fan-out and SSE, metrics, the access log, HTTP/2 and fault injection. It must not contain
SQL."""
