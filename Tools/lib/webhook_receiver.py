#!/usr/bin/env python3
"""A webhook receiver in one file, as a shop's system would run one: it listens on 127.0.0.1,
checks each delivery's Horizon-Signature with the endpoint's secret (docs/api.md, Webhooks),
prints the event on one line and answers 200 (400 when the signature does not match, so the
server tries again). Only Python's standard library.

  webhook_receiver.py --port-file FILE --secret-file FILE

The port it got is written to --port-file once it listens. The secret is read from
--secret-file at each delivery: the server shows it only when the endpoint is registered, after
the receiver's address is known.
"""
import argparse
import hashlib
import hmac
import http.server
import json
import os
import signal
import sys
import time

TOLERANCE = 300


def verify(body: bytes, header: str, secret: str) -> bool:
    parts = [item.split("=", 1) for item in header.split(",") if "=" in item]
    stamps = [value for key, value in parts if key == "t"]
    if len(stamps) != 1 or not stamps[0].isdigit() or abs(time.time() - int(stamps[0])) > TOLERANCE:
        return False
    expected = hmac.new(secret.encode(), stamps[0].encode() + b"." + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, value) for key, value in parts if key == "v1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--secret-file", required=True)
    arguments = parser.parse_args()

    class Receiver(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                with open(arguments.secret_file, encoding="utf-8") as file:
                    secret = file.read().strip()
            except OSError:
                secret = ""
            signed = bool(secret) and verify(body, self.headers.get("Horizon-Signature", ""), secret)
            try:
                event = json.loads(body)
                obj = event.get("data", {}).get("object", {})
                # A payment's `reference` is its receipt's; its order is `orderReference`.
                order = obj.get("orderReference") if "paymentId" in obj else obj.get("reference")
                what = " ".join(
                    [str(event.get("type")), str(event.get("id")), "order={}".format(order)]
                    + (["status={}".format(obj["status"])] if "status" in obj else []))
            except (ValueError, AttributeError):
                what = "unreadable body"
            print("received {} signature={}".format(what, "valid" if signed else "INVALID"), flush=True)
            self.send_response(200 if signed else 400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_) -> None:
            pass

    # SIGTERM ends it, even when started by a process that blocks or ignores the signal (the
    # mask and ignored signals are inherited).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    with open(arguments.port_file + ".tmp", "w", encoding="utf-8") as file:
        file.write(str(server.server_address[1]))
    # Renamed into place: a reader never sees half a number.
    os.replace(arguments.port_file + ".tmp", arguments.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
