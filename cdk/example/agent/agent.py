"""A sample Rayito agent: serves GET /ping and POST /invocations on $PORT."""
import json
import logging
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

log = logging.getLogger("agent")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/ping":
            self.send_error(404)
            return
        self._json({"status": "Healthy"})

    def do_POST(self):
        if self.path != "/invocations":
            self.send_error(404)
            return
        n = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(n) or b"{}")
        log.info("invocation")
        self._json({"answer": "echo: " + str(payload.get("prompt", ""))})

    def _json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", int(os.environ["PORT"])), Handler).serve_forever()
