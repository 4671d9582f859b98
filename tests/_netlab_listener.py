"""A test host's listening daemons (its sshd, its libvirtd): TCP listeners
on the given ports that accept each connection and close it.

Run inside a test host's network namespace by ``tests.netlab``::

    ip netns exec NS python3 -m tests._netlab_listener 22 16509

It prints "ready" once it listens and exits when its standard input
closes, so it never outlives the test process that started it.
"""

import selectors
import socket
import sys
import threading


def serve(ports: list[int]) -> None:
    selector = selectors.DefaultSelector()
    for port in ports:
        listener = socket.create_server(("0.0.0.0", port), backlog=128)
        listener.setblocking(False)
        selector.register(listener, selectors.EVENT_READ)
    print("ready", flush=True)
    threading.Thread(target=_accept, args=(selector,), daemon=True).start()
    # The parent holds our stdin: its end (even a SIGKILL) ends us.
    sys.stdin.buffer.read()


def _accept(selector: selectors.BaseSelector) -> None:
    while True:
        for key, _ in selector.select():
            try:
                conn, _ = key.fileobj.accept()
            except OSError:
                continue
            conn.close()


if __name__ == "__main__":
    serve([int(port) for port in sys.argv[1:]])
