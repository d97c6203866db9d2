"""Fuzzing the embedded API server's selector parsing over HTTP: any labelSelector or fieldSelector gets
a list (200) or a 400 Status that names the selector, never a 5xx or a dropped connection."""

from __future__ import annotations

import urllib.parse

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.helpers import raw_request

_pieces = st.sampled_from(list("ab=!(),<> \t\n0-./_:") + ["in", "notin", "\x00", "\u00e9", "\U0001F600", "%",
                                                          "metadata.name", "status.phase", "app"])
_selector = st.text(max_size=80) | st.lists(_pieces, max_size=30).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(label=_selector, field=_selector)
def test_fuzzed_selectors_get_a_list_or_a_400(api_client, namespace, label, field):
    for param, value in (("labelSelector", label), ("fieldSelector", field)):
        query = urllib.parse.urlencode({param: value})
        code, body = raw_request(api_client, "GET", f"/api/v1/namespaces/{namespace}/configmaps?{query}")
        assert code in (200, 400), (param, value, code, body)
        if code == 400:
            assert body["kind"] == "Status" and body["reason"] == "BadRequest", body
            assert body["message"], body
