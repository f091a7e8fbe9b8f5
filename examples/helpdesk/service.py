#!/usr/bin/env python3
"""A help desk's ticket service, as agentplane's HTTP tools and catalog
provider see it. Python standard library only.

    DESK_TOKEN=change-me python3 examples/helpdesk/service.py [--port 8765]

It serves, to a caller presenting its key ("X-Desk-Token: $DESK_TOKEN"):

  GET  /tickets              the catalog provider: the tickets the person
                             asking may work on (the Agentplane-Context
                             header says who asks): a lead sees every open
                             ticket, anyone else their own and the
                             unassigned ones
  POST /tools/assign_ticket  assigns the ticket the person is working on
                             (the active item of the invocation context) to
                             the agent in args; for the roles agent and lead
  POST /tools/close_ticket   closes the ticket in args; for the role lead
  GET  /log                  what the tools did, oldest first

A tool call is answered once per Idempotency-Key: the same key again gets
the first answer and changes nothing. agentplane derives the key from the
person, the session and the request (never a client's or a model's raw
id), so it means "this request of this person in this session": two
people who happen to send the same request id have two keys here, and a
retried request has its first key. Errors are JSON {"error": "..."}
with a 4xx status, which agentplane reports as the call's failure.
"""

import argparse
import hmac
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TICKETS = {
    "T-1042": {"title": "Printer on fire", "customer": ("C-7", "Acme Corp"), "assignee": None, "status": "open"},
    "T-1043": {"title": "VPN drops every hour", "customer": ("C-9", "Globex"), "assignee": "dana", "status": "open"},
    "T-1044": {"title": "Invoice shows wrong VAT", "customer": ("C-12", "Initech"), "assignee": "fox", "status": "open"},
    "T-1045": {"title": "Password reset loop", "customer": ("C-7", "Acme Corp"), "assignee": None, "status": "open"},
}
AGENTS = {"dana", "fox", "walter"}
MAX_BODY = 64 * 1024


class Desk:
    """The tickets, what was done to them, and the answers by key."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tickets = {k: dict(v) for k, v in TICKETS.items()}
        self.log = []
        self.answers = {}  # (path, idempotency key) -> (status, body)

    def visible(self, principal):
        """The open tickets a principal may work on."""
        lead = "lead" in principal.get("roles", [])
        user = principal.get("user_id", "")
        out = []
        with self.lock:
            for tid, t in sorted(self.tickets.items()):
                if t["status"] != "open":
                    continue
                if lead or t["assignee"] in (None, user):
                    cid, cname = t["customer"]
                    out.append({
                        "id": tid,
                        "display_name": t["title"],
                        "keywords": [tid.lower(), cname.lower()],
                        "related": [{"entity_type": "customer", "id": cid, "display_name": cname, "role": "requester"}],
                    })
        return out

    def once(self, path, key, act):
        """Runs act() once per key; the same key again gets its answer."""
        with self.lock:
            if key and (path, key) in self.answers:
                return self.answers[(path, key)]
            answer = act()
            if key and answer[0] < 500:
                self.answers[(path, key)] = answer
            return answer

    def assign(self, args, ctx):
        # called under the lock
        principal = ctx.get("principal", {})
        roles = principal.get("roles", [])
        if not {"agent", "lead"} & set(roles):
            return 403, {"error": "only a desk agent or lead may assign tickets; %s has roles %s" % (principal.get("user_id"), roles)}
        awc = ctx.get("active_work_context", {})
        entity = awc.get("entity_header")
        if awc.get("entity_type") != "ticket" or not entity:
            return 422, {"error": "no ticket is open in this session: open one first"}
        tid = entity["id"]
        ticket = self.tickets.get(tid)
        if ticket is None or ticket["status"] != "open":
            return 409, {"error": "ticket %s is not open" % tid}
        agent = args.get("agent_id")
        if agent not in AGENTS:
            return 422, {"error": "agent_id: %r is not an agent of this desk" % agent}
        ticket["assignee"] = agent
        return 200, self.record("assigned", tid, ctx, assignee=agent)

    def close(self, args, ctx):
        principal = ctx.get("principal", {})
        if "lead" not in principal.get("roles", []):
            return 403, {"error": "only a lead may close tickets; %s is not one" % principal.get("user_id")}
        tid = args.get("ticket_id")
        ticket = self.tickets.get(tid)
        if ticket is None:
            return 404, {"error": "ticket_id: no ticket %r" % tid}
        if ticket["status"] != "open":
            return 409, {"error": "ticket %s is already %s" % (tid, ticket["status"])}
        ticket["status"] = "closed"
        return 200, self.record("closed", tid, ctx)

    def record(self, what, tid, ctx, **extra):
        entry = {
            "n": len(self.log) + 1,
            "what": what,
            "ticket": tid,
            "by": ctx.get("principal", {}).get("user_id"),
            "authorization": ctx.get("authorization", {}).get("kind"),
            "session": ctx.get("session_id"),
            "idempotency_key": ctx.get("idempotency_key"),
        }
        entry.update(extra)
        self.log.append(entry)
        return entry


def handler(desk, token):
    class Handler(BaseHTTPRequestHandler):
        server_version = "helpdesk/1"

        def log_message(self, fmt, *args):  # quiet: the test reads stdout
            pass

        def answer(self, status, body):
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def authorized(self):
            if not hmac.compare_digest(self.headers.get("X-Desk-Token", ""), token):
                self.answer(401, {"error": "missing or wrong X-Desk-Token"})
                return False
            return True

        def do_GET(self):
            if not self.authorized():
                return
            if self.path == "/tickets":
                try:
                    caller = json.loads(self.headers.get("Agentplane-Context", ""))
                except ValueError:
                    return self.answer(400, {"error": "the Agentplane-Context header is missing or not JSON"})
                return self.answer(200, desk.visible(caller.get("principal", {})))
            if self.path == "/log":
                with desk.lock:
                    return self.answer(200, list(desk.log))
            self.answer(404, {"error": "no such path: " + self.path})

        def do_POST(self):
            if not self.authorized():
                return
            act = {"/tools/assign_ticket": desk.assign, "/tools/close_ticket": desk.close}.get(self.path)
            if act is None:
                return self.answer(404, {"error": "no such tool: " + self.path})
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                return self.answer(413, {"error": "body over %d bytes" % MAX_BODY})
            try:
                req = json.loads(self.rfile.read(length))
                args, ctx = req["args"], req["context"]
            except (ValueError, KeyError, TypeError):
                return self.answer(400, {"error": "want a JSON body with args and context"})
            key = self.headers.get("Idempotency-Key", "")
            status, body = desk.once(self.path, key, lambda: act(args, ctx))
            self.answer(status, body)

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8765, help="port on 127.0.0.1 (0: any free one)")
    opts = ap.parse_args()
    token = os.environ.get("DESK_TOKEN", "")
    if not token:
        sys.exit("helpdesk: set DESK_TOKEN, the key agentplane sends as X-Desk-Token (its headers_env)")
    srv = ThreadingHTTPServer(("127.0.0.1", opts.port), handler(Desk(), token))
    print("helpdesk: listening on http://127.0.0.1:%d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
