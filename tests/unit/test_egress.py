"""Where steps may send requests (workflow/egress.py): every form of an address is judged as the address it is,
the flags refuse only what they say, an allow-list entry lifts only the flags, and what is always refused stays
refused. Names are resolved as netcalls.py resolves them (the system resolver), so the spellings the resolver
reads as numbers (2852039166) are caught too."""

from __future__ import annotations

import ipaddress
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from velashard.workflow.egress import EgressPolicy, Refused, embedded_ipv4, parse_allowed
from velashard.workflow.netcalls import CallError, request, resolve
from velashard.workflow.outbound import Outbound, call_key

DEFAULT = EgressPolicy(own_ports=frozenset({8080}), own_addresses=frozenset({ipaddress.ip_address("10.1.2.3")}))


@pytest.mark.parametrize("host", ["169.254.169.254", "2852039166", "0xa9fea9fe", "0251.0376.0251.0376",
                                  "[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]",
                                  "[2002:a9fe:a9fe::1]", "[fe80::1]", "[fd00:ec2::254]", "100.100.100.200",
                                  "metadata.google.internal", "METADATA.google.internal.", "0.0.0.0", "[::]",
                                  "224.0.0.1", "10.1.2.3"])
def test_always_refused_in_every_form(host):
    everything_allowed = EgressPolicy(block_loopback=False, allow=(parse_allowed("0.0.0.0/0"),
                                                                   parse_allowed("::/0")),
                                      own_addresses=DEFAULT.own_addresses)
    with pytest.raises(Refused):
        resolve(everything_allowed, host, 80)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.9.9.9", "2130706433", "[::1]", "[::ffff:127.0.0.1]",
                                  "localhost"])
def test_loopback_is_refused_by_default_and_allowed_by_flag_or_entry(host):
    with pytest.raises(Refused, match="loopback"):
        resolve(DEFAULT, host, 9999)
    assert _loopback(resolve(EgressPolicy(block_loopback=False), host, 9999))
    allowed = EgressPolicy(allow=(parse_allowed("127.0.0.0/8:9999"), parse_allowed("[::1]:9999")))
    assert _loopback(resolve(allowed, host, 9999))
    with pytest.raises(Refused):
        resolve(allowed, host, 9998)


def _loopback(address) -> bool:
    return address.is_loopback or (embedded_ipv4(address) or address).is_loopback


def test_the_controllers_own_ports_stay_refused_when_loopback_is_allowed():
    open_policy = EgressPolicy(block_loopback=False, allow=(parse_allowed("127.0.0.1"),),
                               own_ports=frozenset({8080}))
    with pytest.raises(Refused, match="the controller itself listens"):
        resolve(open_policy, "127.0.0.1", 8080)
    assert str(resolve(open_policy, "127.0.0.1", 8081)) == "127.0.0.1"


def test_private_ranges_only_by_flag():
    for host in ("10.0.0.1", "192.168.1.1", "172.16.0.1", "[fd12::1]"):
        assert resolve(DEFAULT, host, 443)
        with pytest.raises(Refused, match="private"):
            resolve(EgressPolicy(block_private=True), host, 443)
    assert resolve(EgressPolicy(block_private=True, allow=(parse_allowed("10.0.0.0/8"),)), "10.0.0.1", 443)
    assert resolve(EgressPolicy(block_private=True), "93.184.216.34", 443)


def test_allow_entries_are_checked_when_read():
    assert parse_allowed("[::1]:80").port == 80
    for bad in ("127.0.0.1:0", "not-an-ip", "[::1", "1.2.3.4:x"):
        with pytest.raises(ValueError):
            parse_allowed(bad)


class _Redirecting(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        jump = self.path == "/jump"
        body = b"" if jump else b"x" * (2048 if self.path == "/big" else 2)
        self.send_response(302 if jump else 200)
        if jump:
            self.send_header("Location", "http://169.254.169.254/latest/meta-data")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args) -> None:
        pass


def test_a_redirect_is_checked_like_the_first_address_and_bodies_are_capped():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        policy = EgressPolicy(allow=(parse_allowed("127.0.0.1"),))
        assert request(policy, "GET", url + "/fine", None, {}, 5, 1 << 20).body == b"xx"
        with pytest.raises(CallError, match="169.254.169.254.*link-local"):
            request(policy, "GET", url + "/jump", None, {}, 5, 1 << 20)
        with pytest.raises(CallError, match="larger than 1024 bytes"):
            request(policy, "GET", url + "/big", None, {}, 5, 1024)
        with pytest.raises(CallError, match="loopback"):
            request(EgressPolicy(), "GET", url + "/fine", None, {}, 5, 1 << 20)
    finally:
        server.shutdown()
        server.server_close()


def test_outbound_calls_take_turns_between_namespaces_and_respect_each_limit():
    outbound = Outbound(threads=4, per_namespace=2)
    woken, gate, running = [], threading.Event(), {"slow": 0, "max": 0}
    lock = threading.Lock()
    outbound.wake = woken.append

    def slow():
        with lock:
            running["slow"] += 1
            running["max"] = max(running["max"], running["slow"])
        gate.wait(10)
        with lock:
            running["slow"] -= 1
        return "late"

    for i in range(20):
        outbound.submit(call_key("uid-a", f"s{i}", "a", {}), "tenant-a", "tenant-a/app", slow)
    fast = call_key("uid-b", "s", "a", {"x": 1})
    outbound.submit(fast, "tenant-b", "tenant-b/app", lambda: "quick")
    deadline = time.monotonic() + 10
    while outbound.running(fast) and time.monotonic() < deadline:
        time.sleep(0.01)
    done = outbound.take(fast)
    assert done is not None and done.value == "quick" and "tenant-b/app" in woken
    assert outbound.take(fast) is None  # taken once
    assert running["max"] <= 2 and outbound.pending("uid-a", "s19")
    gate.set()
