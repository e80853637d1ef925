#!/usr/bin/env python3
"""One TCP stream over 127.0.0.1: GB/s of payload from a sender process to a receiver process
(4 MiB writes and reads into a reused buffer, median of ROUNDS transfers of TOTAL MiB). The
reference line for TCP rows in bench/compare.sh's plots: what the kernel moves between two
processes on this machine without any library in the way.

    bench/loopback_tcp.py [TOTAL_MIB] [ROUNDS]
"""
import os
import socket
import statistics
import sys
import time

CHUNK = 4 << 20


def transfer(total: int) -> float:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))  # port 0: the kernel picks a free one
    listener.listen(1)
    port = listener.getsockname()[1]
    pid = os.fork()
    if pid == 0:  # the sender
        listener.close()
        s = socket.create_connection(("127.0.0.1", port))
        data = memoryview(bytearray(CHUNK))
        left = total
        while left > 0:
            n = min(left, CHUNK)
            s.sendall(data[:n])
            left -= n
        s.shutdown(socket.SHUT_WR)
        s.recv(1)  # wait for the receiver's close: the time covers every byte received
        os._exit(0)
    conn, _ = listener.accept()
    listener.close()
    buf = memoryview(bytearray(CHUNK))
    got = 0
    start = time.perf_counter()
    while got < total:
        n = conn.recv_into(buf)
        if n == 0:
            break
        got += n
    elapsed = time.perf_counter() - start
    conn.close()
    os.waitpid(pid, 0)
    if got != total:
        raise SystemExit(f"loopback_tcp.py: received {got} of {total} bytes")
    return total / elapsed / 1e9


def main() -> None:
    total = (int(sys.argv[1]) if len(sys.argv) > 1 else 1024) << 20
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    rates = [transfer(total) for _ in range(rounds)]
    print(f"loopback TCP, one stream: {statistics.median(rates):.3f} GB/s "
          f"(median of {rounds} x {total >> 20} MiB; range {min(rates):.3f}-{max(rates):.3f})")


if __name__ == "__main__":
    main()
