#!/usr/bin/python3
"""A small HTTP(S) server for the egress tests and benchmark, standard library only.

usage: tests/egress_fixtures/serve.py [--addr A] [--port P] [--root DIR]
                                      [--tls-cert PEM --tls-key PEM] [--blob-max BYTES] [--log]
                                      [--require-auth VALUE]... [--request-log FILE]
                                      [--git-backend DIR]

Prints the bound port alone on stdout's first line (flushed), then serves until killed
(SIGTERM/SIGINT end it quietly). It listens only on a loopback address (127.0.0.0/8; default
127.0.0.2): a test server is never reachable from anywhere else.

What it answers (GET and HEAD; query strings are ignored, so git's
/info/refs?service=git-upload-pack gets the dumb-protocol file and git falls back to dumb HTTP):
  /PATH              the file DIR/PATH (a directory: its index.html, else a listing)
  /PATH              when DIR/PATH is not a file (missing, or a directory) but DIR/PATH.json.in
                     is: that file with every @BASE@ replaced by http[s]://HOST (HOST from the
                     request's Host header), as application/json: how the npm metadata points
                     its tarball back at the server under the name the client used
                     (tests/egress_fixtures/make_fixtures.py)
  /bytes/N           N zero bytes (N <= --blob-max, default 1 GiB), sent with sendfile(2) from a
                     sparse memfd when not over TLS: the benchmark's download, fast enough that
                     the server is not what is measured
  /ping              "pong\n"
  /git/REPO/...      with --git-backend DIR: git's smart HTTP protocol (`git http-backend`, the
                     CGI git ships) over the repositories in DIR, fetch and push (GET and POST,
                     request bodies by Content-Length or chunked)
HTTP/1.1 with Content-Length everywhere, so clients may keep connections alive.

--require-auth VALUE (repeatable): every request must carry `Authorization: VALUE` for one of the
values ("Bearer TOKEN", "Basic BASE64"), or it gets 401 with a Basic challenge (so git and pip
send the credentials of their URL). --request-log FILE: one line per request, appended and
flushed: "METHOD PATH STATUS" (the path without its query), for tests to see what arrived.
"""

import argparse
import http.server
import subprocess
import ipaddress
import os
import signal
import socket
import ssl
import sys
import urllib.parse

CHUNK = 1 << 20


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cagent-egress-fixture/1"
    sys_version = ""
    # A silent client does not hold a thread forever.
    timeout = 30

    def __init__(self, request, client_address, server):
        super().__init__(request, client_address, server, directory=server.root)

    def log_message(self, fmt, *args):  # noqa: N802 (the base class's name)
        if self.server.log:
            sys.stderr.write("serve.py: %s %s\n" % (self.address_string(), fmt % args))

    def _path_only(self) -> str:
        return urllib.parse.urlsplit(self.path).path

    def _send_small(self, body: bytes, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send_bytes(self, n: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.command == "HEAD":
            return
        self.wfile.flush()
        if self.server.blob_fd >= 0 and not isinstance(self.connection, ssl.SSLSocket):
            # socket.sendfile copes with the handler's socket timeout (a non-blocking socket).
            with os.fdopen(os.dup(self.server.blob_fd), "rb") as blob:
                self.connection.sendfile(blob, 0, n)
            return
        zeros = bytes(CHUNK)
        left = n
        while left > 0:
            step = min(left, CHUNK)
            self.wfile.write(zeros[:step])
            left -= step

    def log_request(self, code="-", size="-"):  # noqa: N802 (the base class's name)
        if self.server.request_log:
            line = f"{self.command} {self._path_only()} {code}\n"
            with open(self.server.request_log, "a", encoding="utf-8") as f:
                f.write(line)
        super().log_request(code, size)

    def _authorized(self) -> bool:
        """False (after answering 401) when --require-auth is given and not met."""
        if not self.server.require_auth:
            return True
        if self.headers.get("Authorization", "") in self.server.require_auth:
            return True
        body = b"authorization required\n"
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="cagent-fixture"')
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return False

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0") or "0"))

    def _git(self) -> None:
        """git http-backend as CGI: its headers (Status: among them), then its body."""
        split = urllib.parse.urlsplit(self.path)
        body = self._read_body() if self.command == "POST" else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.server.git_backend,
            "GIT_HTTP_EXPORT_ALL": "1",
            "REMOTE_USER": "fixture",  # http-backend enables receive-pack for a known user
            "REQUEST_METHOD": self.command,
            "PATH_INFO": split.path[len("/git"):],
            "QUERY_STRING": split.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "GIT_CONFIG_NOSYSTEM": "1",
            # The repositories may belong to another user than the server's (a test's run user).
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
            "HOME": self.server.git_backend,
        }
        proc = subprocess.run(["git", "http-backend"], input=body, env=env,
                              capture_output=True, check=False)
        head, _, payload = proc.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = proc.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _dispatch(self) -> bool:
        """Answers the special paths; False when the static handler should answer."""
        if not self._authorized():
            return True
        path = self._path_only()
        if self.server.git_backend and path.startswith("/git/"):
            self._git()
            return True
        if path == "/ping":
            self._send_small(b"pong\n", "text/plain")
            return True
        if path.startswith("/bytes/"):
            try:
                n = int(path[len("/bytes/"):])
            except ValueError:
                self.send_error(400, "bad byte count")
                return True
            if n < 0 or n > self.server.blob_max:
                self.send_error(400, "byte count over --blob-max")
                return True
            self._send_bytes(n)
            return True
        local = self.translate_path(path)
        if not os.path.isfile(local) and os.path.isfile(local + ".json.in"):
            with open(local + ".json.in", encoding="utf-8") as f:
                text = f.read()
            host = self.headers.get("Host", "")
            scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
            self._send_small(text.replace("@BASE@", f"{scheme}://{host}").encode(),
                             "application/json")
            return True
        return False

    def do_GET(self):  # noqa: N802
        if not self._dispatch():
            self.path = self._path_only()
            super().do_GET()

    def do_HEAD(self):  # noqa: N802
        if not self._dispatch():
            self.path = self._path_only()
            super().do_HEAD()

    def do_POST(self):  # noqa: N802
        if not self._dispatch():
            self._read_body()
            self.send_error(405, "POST is served under /git/ only")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, root, log, blob_max, tls, extra):
        self.root = root
        self.log = log
        self.require_auth = extra.require_auth or []
        self.request_log = extra.request_log
        self.git_backend = os.path.abspath(extra.git_backend) if extra.git_backend else ""
        self.blob_max = blob_max
        self.blob_fd = -1
        if blob_max > 0 and hasattr(os, "memfd_create"):
            # A sparse memfd reads as zeros and takes no memory: sendfile's source.
            self.blob_fd = os.memfd_create("cagent-egress-blob")
            os.ftruncate(self.blob_fd, blob_max)
        self.tls = tls
        super().__init__(addr, Handler)

    def get_request(self):
        sock, peer = super().get_request()
        # The handler writes a response's head and body separately; without this, Nagle's
        # algorithm holds the body for the client's delayed ACK (40 ms on Linux), which the
        # benchmark would then measure instead of the proxies.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            # The handshake happens in the handler's thread on first read, so a client that
            # never speaks TLS does not stall the accept loop.
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, peer

    def shutdown_request(self, request):
        if isinstance(request, ssl.SSLSocket):
            # close_notify first, so a client reading to the end sees a clean TLS end.
            try:
                request.settimeout(2)
                request = request.unwrap()
            except (OSError, ValueError):
                pass
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        if self.log:
            super().handle_error(request, client_address)


def main() -> int:
    parser = argparse.ArgumentParser(description="Serve the egress tests' fixtures.")
    parser.add_argument("--addr", default="127.0.0.2")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--root", default=".")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--blob-max", type=int, default=1 << 30)
    parser.add_argument("--log", action="store_true", help="log requests on stderr")
    parser.add_argument("--require-auth", action="append",
                        help="an Authorization value every request must carry (repeatable)")
    parser.add_argument("--request-log", help="append METHOD PATH STATUS lines to this file")
    parser.add_argument("--git-backend", help="serve the repositories here at /git/ (smart HTTP)")
    args = parser.parse_args()
    try:
        if not ipaddress.ip_address(args.addr).is_loopback:
            raise ValueError
    except ValueError:
        print(f"serve.py: --addr must be a loopback address, not {args.addr!r}", file=sys.stderr)
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        print("serve.py: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    tls = None
    if args.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    family = socket.AF_INET6 if ":" in args.addr else socket.AF_INET
    Server.address_family = family
    server = Server((args.addr, args.port), os.path.abspath(args.root), args.log,
                    args.blob_max, tls, args)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever(poll_interval=0.2)
    except (KeyboardInterrupt, SystemExit):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
