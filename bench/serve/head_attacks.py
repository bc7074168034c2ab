#!/usr/bin/python3
"""expctl serve under hostile request heads (issue 52): the server's RSS and what each client got.

A benchmark, not a test: it prints a table and asserts nothing (the behaviour is tested in
tests/unit/serve/test_server.cpp and tests/cli/test_cli_serve.cpp). Each attack runs against a
fresh `expctl serve` on a store of 3 runs, without the token unless said:

  line      a 128 MiB request line
  headers   25 000 header lines of 4 KiB each
  trickle   one byte every 3 s (held at most 30 s), then SIGTERM while it still trickles
  range     a 7.9 KB Range header (2 600 ranges), without the token
  range40   40 ranges of /assets/chart.js with the token (the review's reading; 2 600 would be ~520 MB)

  bench/serve/head_attacks.py EXPCTL FIXTURE [ATTACK ...]
      EXPCTL: e.g. build/ci/expctl; FIXTURE: build/ci/tests/unit/serve/expctl_serve_fixture (makes the
      store: 3 short runs); ATTACK: default all
Columns: RSS before the attack, the highest RSS sampled every 20 ms during it (MiB), the status
the client got (- for none), bytes answered, seconds until the server closed the connection.
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

TOKEN = "bench-token-0123456789abcdef"


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class Server:
    def __init__(self, expctl, fixture, work):
        db = os.path.join(work, "expctl.db")
        token = os.path.join(work, "token")
        with open(token, "w") as f:
            f.write(TOKEN + "\n")
        os.chmod(token, 0o600)
        if not os.path.exists(db):
            subprocess.run([fixture, "many", db, "3"], check=True, capture_output=True)
        self.out = open(os.path.join(work, "serve.out"), "w+")
        self.process = subprocess.Popen([expctl, "--db", db, "serve", "--port", "0", "--token-file", token],
                                        stdout=self.out, stderr=subprocess.STDOUT)
        self.port = None
        for _ in range(400):
            self.out.seek(0)
            for line in self.out.read().splitlines():
                if line.startswith("open  http://127.0.0.1:"):
                    self.port = int(line.split(":")[2].split("/")[0])
            if self.port:
                break
            time.sleep(0.05)
        if not self.port:
            raise SystemExit("head_attacks.py: expctl serve did not start")
        self.peak = 0.0
        self.sampling = True
        self.sampler = threading.Thread(target=self.sample)
        time.sleep(0.3)
        self.before = rss_mib(self.process.pid)
        self.sampler.start()

    def sample(self):
        while self.sampling:
            try:
                self.peak = max(self.peak, rss_mib(self.process.pid))
            except (FileNotFoundError, ProcessLookupError):
                return
            time.sleep(0.02)

    def stop(self):
        self.sampling = False
        self.sampler.join()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.out.close()


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    return s


def read_answer(s, timeout=10.0):
    """Bytes until the server closes (or `timeout`), and the seconds that took."""
    s.settimeout(timeout)
    data = b""
    start = time.monotonic()
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data, time.monotonic() - start


def status_of(data):
    return data[9:12].decode() if data.startswith(b"HTTP/1.1 ") else "-"


def flood(port, first, filler, total):
    s = connect(port)
    start = time.monotonic()
    sent = 0
    block = first + filler * (65536 - len(first))
    s.settimeout(10)
    try:
        while sent < total:
            sent += s.send(block if sent == 0 else filler * 65536)
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    data, _ = read_answer(s)
    s.close()
    return data, time.monotonic() - start, sent


def attack(name, server):
    port = server.port
    host = f"Host: 127.0.0.1:{port}\r\n".encode()
    if name == "line":
        data, held, sent = flood(port, b"GET /", b"a", 128 << 20)
        return data, held, f"sent {sent >> 20} MiB"
    if name == "headers":
        line = b"X-F: " + b"v" * 4089 + b"\r\n"
        head = b"GET / HTTP/1.1\r\n" + host
        s = connect(port)
        start = time.monotonic()
        sent = 0
        s.settimeout(10)
        try:
            s.sendall(head)
            for _ in range(25000):
                s.sendall(line)
                sent += 1
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass
        data, _ = read_answer(s)
        s.close()
        return data, time.monotonic() - start, f"sent {sent} lines"
    if name == "trickle":
        s = connect(port)
        start = time.monotonic()
        text = b"GET / HTTP/1.1\r\n" + host + b"X-Slow: " + b"a" * 100
        closed = None
        data = b""
        for byte in text:
            try:
                s.send(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = time.monotonic() - start
                break
            s.settimeout(3)
            try:
                chunk = s.recv(65536)  # an answer, or the end of the connection
                more, _ = read_answer(s, 1) if chunk else (b"", 0)
                data = chunk + more
                closed = time.monotonic() - start
                break
            except socket.timeout:
                pass
            except ConnectionResetError:
                closed = time.monotonic() - start
                break
            if time.monotonic() - start > 30:
                break
        held = closed if closed is not None else time.monotonic() - start
        # SIGTERM while a second client trickles.
        t = connect(port)
        t.send(b"GET / HTTP/1.1\r\n")
        time.sleep(0.5)
        term = time.monotonic()
        server.process.terminate()
        def drip():
            try:
                for _ in range(10):
                    t.send(b"a")
                    time.sleep(3)
            except OSError:
                pass
        stop_thread = threading.Thread(target=drip)
        stop_thread.daemon = True
        stop_thread.start()
        try:
            server.process.wait(40)
            exited = f"SIGTERM -> exit in {time.monotonic() - term:.2f} s"
        except subprocess.TimeoutExpired:
            exited = "SIGTERM -> still up after 40 s"
        s.close()
        return data, held, exited
    if name in ("range", "range40"):
        count = 2600 if name == "range" else 40
        ranges = b"Range: bytes=0-" + b",0-" * (count - 1) + b"\r\n"
        auth = f"Authorization: Bearer {TOKEN}\r\n".encode() if name == "range40" else b""
        target = b"/assets/chart.js" if name == "range40" else b"/"
        s = connect(port)
        start = time.monotonic()
        s.sendall(b"GET " + target + b" HTTP/1.1\r\n" + host + auth + ranges + b"Connection: close\r\n\r\n")
        data, _ = read_answer(s, 30)
        s.close()
        return data, time.monotonic() - start, f"Range header {len(ranges)} B"
    raise SystemExit(f"head_attacks.py: no attack {name}")


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    expctl, fixture = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or ["line", "headers", "trickle", "range", "range40"]
    print(f"expctl: {expctl}")
    print(f"{'attack':8} {'RSS before':>10} {'RSS peak':>9} {'status':>6} {'answered':>12} {'closed after':>12}  note")
    with tempfile.TemporaryDirectory(prefix="serve-attacks.") as work:
        for name in names:
            server = Server(expctl, fixture, work)
            try:
                data, held, note = attack(name, server)
            finally:
                server.stop()
            print(f"{name:8} {server.before:9.1f}M {server.peak:8.1f}M {status_of(data):>6} {len(data):>11}B "
                  f"{held:11.1f}s  {note}")


if __name__ == "__main__":
    main()
