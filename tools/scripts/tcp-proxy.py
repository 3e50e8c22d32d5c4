#!/usr/bin/env python3
"""A TCP proxy on loopback that can stop forwarding, one way or both: a network partition between
one replica and PostgreSQL for the fault runs, without touching the host's network.

    tcp-proxy.py TARGET_PORT PORT_FILE CONTROL_FILE

Listens on a free loopback port (written to PORT_FILE once listening) and forwards every
connection to 127.0.0.1:TARGET_PORT. CONTROL_FILE says which way bytes flow: `both` (also when the
file is missing or empty), `none`, `to-server` (the replica's bytes reach PostgreSQL, not the
answers) or `to-client`. A direction that is cut is not read: its bytes wait in the kernel's
buffers, as a sender's do while it retransmits into a partition, and go through once it flows
again. New connections are accepted but nothing crosses a cut, so connecting times out as it would
across a partition. Ends on SIGTERM.
"""
import os
import selectors
import signal
import socket
import sys


def main():
    target, port_file, control_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(listener.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    peers = {}  # socket -> (peer socket, direction name of the bytes read from it)
    selector = selectors.DefaultSelector()
    flows = {"to-server", "to-client"}
    control_stamp = None

    def close(sock):
        other, _ = peers.pop(sock, (None, None))
        for s in (sock, other):
            if s is None:
                continue
            peers.pop(s, None)
            try:
                selector.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def register():
        # Only the directions that flow are read.
        for sock, (_, direction) in list(peers.items()):
            wanted = direction in flows
            try:
                selector.get_key(sock)
                if not wanted:
                    selector.unregister(sock)
            except KeyError:
                if wanted:
                    selector.register(sock, selectors.EVENT_READ)

    selector.register(listener, selectors.EVENT_READ)
    while True:
        # The control file is looked at every 10 ms (the select's timeout), not waited on.
        try:
            stamp = os.stat(control_file).st_mtime_ns
        except FileNotFoundError:
            stamp = None
        if stamp != control_stamp:
            control_stamp = stamp
            try:
                with open(control_file) as f:
                    text = f.read().strip()
            except FileNotFoundError:
                text = ""
            flows = {"both": {"to-server", "to-client"}, "": {"to-server", "to-client"}, "none": set(),
                     "to-server": {"to-server"}, "to-client": {"to-client"}}.get(text, {"to-server", "to-client"})
            register()
        for key, _ in selector.select(timeout=0.01):
            sock = key.fileobj
            if sock is listener:
                client, _ = listener.accept()
                try:
                    server = socket.create_connection(("127.0.0.1", target))
                except OSError:
                    client.close()  # PostgreSQL is down: the replica sees its connection closed
                    continue
                peers[client] = (server, "to-server")
                peers[server] = (client, "to-client")
                register()
                continue
            if sock not in peers:
                continue
            other, _ = peers[sock]
            try:
                data = sock.recv(65536)
                if not data:
                    close(sock)
                    continue
                other.sendall(data)
            except OSError:
                close(sock)


if __name__ == "__main__":
    main()
