"""Repro of the lost bytes before a reset in tests/test_stream.py's /reset.

The upstream answers /reset with a head (Content-Length 10000), writes 2000
body bytes, then closes with SO_LINGER 0 (a TCP reset). A linger-0 close
discards whatever is still in the send queue. With Nagle's algorithm on
(BaseHTTPRequestHandler's default), the 2000 bytes wait there for the ACK of
the head whenever the peer delays its ACKs, as Linux does on a connection
that already carried request/response exchanges (a pooled one): the peer
then sees the head and the reset, and no body byte.

Each run opens a connection, makes 20 plain requests on it, then /reset,
and counts the bodies shorter than 2000 bytes.

    .venv/bin/python scripts/reset_repro.py nagle       # the old handler: every body lost
    .venv/bin/python scripts/reset_repro.py nodelay     # disable_nagle_algorithm = True: none
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RUNS = 300


def main() -> None:
    """Run the repro with the handler named on the command line."""
    nodelay = sys.argv[1:] == ["nodelay"]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = nodelay

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/ok":
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
                return
            self.send_response(200)
            self.send_header("Content-Length", "10000")
            self.end_headers()
            self.wfile.write(b"r" * 2000)
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    short = 0
    for _ in range(RUNS):
        with socket.create_connection(("127.0.0.1", port)) as c:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(20):
                c.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
                got = b""
                while not got.endswith(b"ok"):
                    got += c.recv(65536)
            c.sendall(b"GET /reset HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            try:
                while chunk := c.recv(65536):
                    data += chunk
            except ConnectionResetError:
                pass
            body = data.partition(b"\r\n\r\n")[2]
            short += len(body) < 2000
    srv.shutdown()
    print(f"{'nodelay' if nodelay else 'nagle'}: {short} of {RUNS} bodies short")


if __name__ == "__main__":
    main()
