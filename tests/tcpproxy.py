"""A TCP proxy between engines and their database server, to take the
database away from them and give it back.

``cut()`` drops every open connection and closes the listening socket, so
a new connection is refused, as from a server that is down; ``restore()``
listens again on the same port. Threads are fine here: this is a test
helper, not recovery code.
"""

import socket
import threading
import time

# How long restore() tries to listen on the port again.
REBIND_TIMEOUT = 5.0


class TcpProxy:
    def __init__(self, target_host: str, target_port: int,
                 listen_host: str = "127.0.0.1") -> None:
        """Forward connections to ``listen_host`` (a free port) to the
        target."""
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self.port = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._cut = True

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> "TcpProxy":
        self.restore()
        return self

    def cut(self) -> None:
        """Drop every connection and refuse new ones."""
        with self._lock:
            self._cut = True
            listener, self._listener = self._listener, None
            dropped, self._open = self._open, set()
        if listener is not None:
            _close(listener)
        for sock in dropped:
            _close(sock)

    def restore(self) -> None:
        """Accept connections again, on the same port."""
        listener = self._listen()
        with self._lock:
            self._cut = False
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,),
                         name=f"tcpproxy-{self.port}", daemon=True).start()

    def close(self) -> None:
        self.cut()

    def __enter__(self) -> "TcpProxy":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- forwarding --------------------------------------------------------
    def _listen(self) -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + REBIND_TIMEOUT
        while True:
            try:
                listener.bind((self.listen_host, self.port))
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    listener.close()
                    raise RuntimeError(
                        f"cannot listen on {self.listen_host}:{self.port} "
                        f"again: "
                        f"{exc}") from exc
                time.sleep(0.05)
        listener.listen(64)
        self.port = listener.getsockname()[1]
        return listener

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut: the listener was shut down
            self._connect(client)

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            _close(client)
            return
        upstream.settimeout(None)
        with self._lock:
            cut = self._cut
            if not cut:
                self._open.update((client, upstream))
        if cut:
            _close(client)
            _close(upstream)
            return
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(source, sink),
                             daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Copy one direction until either side ends; then end both."""
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._open.difference_update((source, sink))
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    """Close ``sock`` and wake a thread blocked on it: close() alone
    leaves a blocked recv() or accept() waiting on Linux."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
