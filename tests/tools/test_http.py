"""http_request on hostile responses: whatever the server sends ends as an HttpResponse or an
HttpError, never as another exception, for the browser and the live search engines alike.

Every server here is a FakeWeb on 127.0.0.1 started by the test.
"""

from __future__ import annotations

import pytest
import requests

from llm_marl.errors import InfrastructureError
from llm_marl.tools import http as http_module
from llm_marl.tools.http import HttpError, http_request
from llm_marl.tools.search import BraveSearch, SearXNGSearch, SerperSearch
from tests.tools.fakeweb import FakeWeb, Reply


@pytest.fixture
def web():
    with FakeWeb() as server:
        yield server


def get(url: str) -> http_module.HttpResponse:
    return http_request("GET", url, timeout=5, max_bytes=10_000)


# Location headers that requests' own redirect pre-computation (done even with
# allow_redirects=False) could not decode or parse: (raw header bytes, as http.client hands
# them to us, decoded as Latin-1).
HOSTILE_LOCATIONS = [
    (b"/caf\xe9", "/caf\xe9"),  # Latin-1: not UTF-8 (UnicodeDecodeError)
    (b"http://ex\xe4mple.invalid/", "http://ex\xe4mple.invalid/"),
    (b"http://[::1", "http://[::1"),  # unclosed IPv6 bracket (ValueError)
    (b"http://]x[/", "http://]x[/"),
    (b"/caf\xc3\xa9", "/caf\xc3\xa9"),  # UTF-8: always worked, still does
]


@pytest.mark.parametrize("raw, location", HOSTILE_LOCATIONS)
@pytest.mark.parametrize("status", [301, 302, 307])
def test_a_redirect_comes_back_with_its_location_as_sent(web, raw, location, status):
    web.route("/r", Reply(raw=b"HTTP/1.0 %d Moved\r\nLocation: %s\r\n\r\n" % (status, raw)))
    response = get(web.url("/r"))
    assert response.status == status
    assert response.headers["location"] == location


def test_a_plain_redirect_is_not_followed(web):
    web.route("/r", Reply(status=302, headers={"Location": "/elsewhere"}))
    response = get(web.url("/r"))
    assert response.status == 302 and response.headers["location"] == "/elsewhere"
    assert web.count("/elsewhere") == 0


def test_an_unprocessable_response_is_a_protocol_error(web, monkeypatch):
    """The safety net: should requests raise a non-RequestException on a response again
    (here: its redirect pre-computation put back), it is an HttpError."""
    monkeypatch.setattr(
        http_module._OneHopSession,
        "get_redirect_target",
        requests.Session.get_redirect_target,
    )
    web.route("/latin", Reply(raw=b"HTTP/1.0 301 Moved\r\nLocation: /caf\xe9\r\n\r\n"))
    web.route("/v6", Reply(raw=b"HTTP/1.0 302 Found\r\nLocation: http://[::1\r\n\r\n"))
    for path in ("/latin", "/v6"):
        with pytest.raises(HttpError) as info:
            get(web.url(path))
        assert info.value.kind == "protocol"
        assert "could not be processed" in str(info.value)


@pytest.mark.parametrize("url", ["http://[::1", "http://]x[/", "https://[zz/"])
def test_an_unparseable_url_is_an_invalid_url_error(url):
    with pytest.raises(HttpError) as info:
        get(url)
    assert info.value.kind == "invalid_url"


ENGINES = {
    "serper": (SerperSearch, "/search", {"api_key": "k"}),
    "brave": (BraveSearch, "/res/v1/web/search", {"api_key": "k"}),
    "searxng": (SearXNGSearch, "/search", {}),
}


@pytest.mark.parametrize("name", sorted(ENGINES))
@pytest.mark.parametrize("raw", [b"/caf\xe9", b"http://[::1"])
def test_live_engines_raise_infrastructure_errors_on_hostile_redirects(web, name, raw):
    cls, path, kw = ENGINES[name]
    engine = cls(base_url=web.base_url, timeout=5, backoff=0, sleep=lambda s: None, **kw)
    web.route(path, Reply(raw=b"HTTP/1.0 302 Found\r\nLocation: %s\r\n\r\n" % raw))
    with pytest.raises(InfrastructureError, match="HTTP 302"):
        engine.search("q")
