#!/usr/bin/env python3
"""A stand-in for an OpenTelemetry collector, for the smoke test: accepts OTLP/HTTP exports
(POST /v1/traces, protobuf), appends each body to OUT, and answers 200 with an empty
ExportTraceServiceResponse. Listens on loopback on a free port, written to PORT_FILE.

Usage: otlp-receiver.py OUT PORT_FILE
"""
import http.server
import sys

out_path, port_file = sys.argv[1], sys.argv[2]


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(out_path, "ab") as out:
            out.write(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
with open(port_file, "w") as f:
    f.write(f"{server.server_address[1]}\n")
server.serve_forever()
