"""Large response bodies are decoded with the cyclic collector paused, and it comes back as it was."""

from __future__ import annotations

import gc
import json
import threading

from velashard.kube.client import LARGE_BODY, decode_body, gc_paused


def test_a_large_body_decodes_as_json_does_and_the_collector_comes_back_on():
    page = {"items": [{"metadata": {"name": f"d{i}", "labels": {"a": "b"}}, "spec": {"x": [i]}}
                      for i in range(2000)]}
    raw = json.dumps(page).encode()
    assert len(raw) > LARGE_BODY
    assert gc.isenabled()
    assert decode_body(raw) == page and decode_body(b'{"a": 1}') == {"a": 1}
    assert gc.isenabled()


def test_overlapping_pauses_end_with_the_last_and_a_disabled_collector_stays_off():
    inner_started, outer_done = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inner_started.set()
            outer_done.wait(5)
            assert not gc.isenabled()  # the first pause ended, this one goes on

    thread = threading.Thread(target=other)
    with gc_paused():
        thread.start()
        inner_started.wait(5)
    assert not gc.isenabled()
    outer_done.set()
    thread.join(5)
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
