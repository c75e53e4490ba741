#!/usr/bin/env python3
"""metadata_server.py — a local stand-in for one cloud's instance metadata service, answering as
that provider documents it, for the preemption notice tests (DDPRUN_METADATA_URL points at it).

  metadata_server.py PROVIDER DIR [PORT]      PROVIDER: aws | gcp | azure

Listens on 127.0.0.1 (PORT, else a free port; written to DIR/port). Until DIR/notice exists it answers "no
notice"; from then on it answers with the provider's documented notice and writes DIR/served (the
time it first did). Requests without the provider's required header (AWS: an IMDSv2 token from
PUT /latest/api/token; GCP: Metadata-Flavor: Google; Azure: Metadata: true) are refused as the
real services refuse them, and each refusal is logged to DIR/requests.log with "REFUSED".
Azure also lists Preempt events for 80 other VMs of the scale set's placement group from the start
(about 24 KB, as a mass eviction does): only events that name this VM (vm-under-test) concern it.
As Microsoft documents, Scheduled Events start on their first request, which Azure answers late
(here after 3 s; the documentation says up to two minutes), and with DIR/name_fails the first
request for the VM's name fails with HTTP 503. While DIR/garbage exists, the notice endpoint answers 200
with bytes that are no notice (random bytes, escapes and NULs among them), as a broken service or
a captive proxy might. AWS inside a container whose instance's hop limit is 1: with DIR/token_lost the
token's PUT gets no answer (the client times out, as the answer dropped on its way would leave it);
with DIR/imdsv1 requests without a token are answered too (IMDSv1 on; else 401, as IMDSv2 required).
As AWS's service does, every AWS answer carries the header Server: EC2ws.
"""
import http.server
import json
import os
import sys
import threading
import time

PROVIDER, DIR = sys.argv[1], sys.argv[2]
TOKENS = set()
LOCK = threading.Lock()
VM = "vm-under-test"


def notice_due():
    if not os.path.exists(os.path.join(DIR, "notice")):
        return False
    served = os.path.join(DIR, "served")
    with LOCK:
        if not os.path.exists(served):
            with open(served, "w") as f:
                f.write(f"{time.time():.3f}\n")
    return True


FIRST = {"events": True, "name": True}


def first_request(what):
    with LOCK:
        first, FIRST[what] = FIRST[what], False
    return first


def azure_events():
    events = [{"EventId": "0F1C-OTHER-%02d" % i, "EventStatus": "Scheduled", "EventType": "Preempt",
               "ResourceType": "VirtualMachine", "Resources": ["other-vm-%02d" % i], "NotBefore": "",
               "Description": "", "EventSource": "Platform", "DurationInSeconds": -1} for i in range(80)]
    if notice_due():
        events.append({"EventId": "5A2E-THIS", "EventStatus": "Scheduled", "EventType": "Preempt",
                       "ResourceType": "VirtualMachine", "Resources": [VM],
                       "NotBefore": "Wed, 25 Nov 2026 18:02:00 GMT", "Description": "",
                       "EventSource": "Platform", "DurationInSeconds": -1})
    # compact, as the service sends it
    return json.dumps({"DocumentIncarnation": 2, "Events": events}, separators=(",", ":"))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def version_string(self):
        return "EC2ws" if PROVIDER == "aws" else super().version_string()

    def log_message(self, fmt, *args):
        with open(os.path.join(DIR, "requests.log"), "a") as f:
            f.write("%s %s\n" % (self.command, fmt % args))

    def reply(self, status, body="", headers=()):
        data = body.encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status, why):
        self.log_message("REFUSED %s: %s", self.path, why)
        self.reply(status, why)

    def do_PUT(self):
        if PROVIDER == "aws" and self.path == "/latest/api/token":
            if os.path.exists(os.path.join(DIR, "token_lost")):
                self.log_message("LOST the token's answer")
                time.sleep(3)  # beyond the client's 2 s: no answer reaches it
                self.close_connection = True
                return
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
            if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return self.refuse(400, "missing or bad X-aws-ec2-metadata-token-ttl-seconds")
            token = "tok-%d" % len(TOKENS)
            TOKENS.add(token)
            return self.reply(200, token)
        self.reply(404 if PROVIDER != "gcp" else 405, "not found")

    def do_GET(self):
        getattr(self, "get_" + PROVIDER)()

    def garbage(self):
        body = b"\x1b[2J\x00" + os.urandom(300)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def get_aws(self):
        v1 = os.path.exists(os.path.join(DIR, "imdsv1"))
        if self.headers.get("X-aws-ec2-metadata-token") not in TOKENS and not v1:
            return self.refuse(401, "IMDSv2 token missing or unknown")
        if self.path == "/latest/meta-data/spot/instance-action" and os.path.exists(os.path.join(DIR, "garbage")):
            return self.garbage()
        if self.path == "/latest/meta-data/spot/instance-action" and notice_due():
            return self.reply(200, '{"action": "terminate", "time": "2026-11-25T18:02:00Z"}')
        self.reply(404, "Not Found")

    def get_gcp(self):
        flavor = [("Metadata-Flavor", "Google")]
        if self.headers.get("Metadata-Flavor") != "Google":
            return self.refuse(403, "Missing Metadata-Flavor:Google header.")
        if self.path.split("?")[0] == "/computeMetadata/v1/instance/preempted":
            return self.reply(200, "TRUE" if notice_due() else "FALSE", flavor)
        self.reply(404, "Not Found", flavor)

    def get_azure(self):
        if self.headers.get("Metadata") != "true":
            return self.refuse(400, '{"error": "Bad request. Required metadata header not specified"}')
        path, _, query = self.path.partition("?")
        if "api-version=" not in query:
            return self.refuse(400, '{"error": "Bad request. api-version was not specified"}')
        if path == "/metadata/scheduledevents":
            if first_request("events"):
                time.sleep(3)
            return self.reply(200, azure_events(), [("Content-Type", "application/json")])
        if path == "/metadata/instance":
            return self.reply(200, json.dumps({"compute": {"name": VM, "vmId": "02aab8a4"}, "network": {}}),
                              [("Content-Type", "application/json")])
        if path == "/metadata/instance/compute/name":
            if first_request("name") and os.path.exists(os.path.join(DIR, "name_fails")):
                return self.reply(503, "Service Unavailable")
            return self.reply(200, VM)
        self.reply(404, "Not Found")


server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[3]) if len(sys.argv) > 3 else 0), Handler)
with open(os.path.join(DIR, "port.tmp"), "w") as f:
    f.write(str(server.server_address[1]))
os.rename(os.path.join(DIR, "port.tmp"), os.path.join(DIR, "port"))
server.serve_forever()
