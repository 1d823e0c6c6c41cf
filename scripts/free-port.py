#!/usr/bin/env python3
"""Prints a free TCP port on 127.0.0.1 for a test server to listen on.

The port is taken below the kernel's ephemeral range (net.ipv4.ip_local_port_range), as the Swift
tests' freeLoopbackPort() does: a port from that range (what binding port 0 hands out) can be taken
by any outgoing connection of a test running in parallel between the moment it is printed here and
the moment the server binds it ("Address already in use": PostgresOutageTests failed so). Below the
range, only another listener that picked the same random port could take it.
"""
import random
import socket

try:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
        ephemeral_low = int(ports.read().split()[0])
except (OSError, ValueError, IndexError):
    ephemeral_low = 32768

def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False

if ephemeral_low > 12000:
    for _ in range(200):  # bounded: almost every port down there is free
        candidate = random.randrange(10000, ephemeral_low)
        if bindable(candidate):
            print(candidate)
            raise SystemExit(0)
with socket.socket() as s:  # no room below the range: an ephemeral port, as before
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
