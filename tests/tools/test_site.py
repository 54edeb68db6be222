"""LocalSite: a corpus served over real HTTP on 127.0.0.1, read back by the real browser."""

from __future__ import annotations

import gc
import socket
import time

import pytest
import requests

from llm_marl.errors import DataError, InfrastructureError
from llm_marl.tools.calls import Toolbox
from llm_marl.tools.search import Document, LocalSearch, search_tool
from llm_marl.tools.site import LocalSite

DOCS = [
    Document(
        "shirley",
        "Shirley Temple",
        "Shirley Temple was an actress.\n\nShe became a diplomat.",
        groups=("q1",),
    ),
    Document(
        "kiss",
        "Kiss and Tell",
        "A 1945 film starring Shirley Temple as Corliss Archer.",
        groups=("q1",),
    ),
    Document(
        "waldo", "Janet Waldo", "Janet Waldo voiced Corliss Archer on the radio.", groups=("q2",)
    ),
    Document(
        "odd/id ü?#", "<script>alert('x')</script> & Co", "Text with <b>markup</b> & ampersands."
    ),
    Document("corliss", "Corliss Archer", "A fictional teenager.", groups=("q2",)),
]


def refused(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_pages_links_and_browsing():
    with LocalSite(DOCS, name="Test Wiki") as site:
        assert site.base_url.startswith("http://127.0.0.1:")
        browser = site.browser()
        page = browser.browse(site.url_for("kiss"))
        assert page.ok, page.error
        assert page.title == "Kiss and Tell - Test Wiki"
        assert "# Kiss and Tell" in page.text
        assert "A 1945 film starring Shirley Temple as Corliss Archer." in page.text
        # Chrome a real page has is dropped by the browser:
        assert "Served locally" not in page.text and "offlineWeb" not in page.text
        # Related: same group (shirley), and titles the text mentions (shirley, corliss).
        assert f"[Shirley Temple]({site.url_for('shirley')})" in page.text
        assert f"[Corliss Archer]({site.url_for('corliss')})" in page.text
        assert "Janet Waldo" not in page.text  # neither grouped with it nor mentioned
        shirley = browser.browse(site.url_for("shirley"))
        assert "Shirley Temple was an actress.\n\nShe became a diplomat." in shirley.text
        assert f"[Kiss and Tell]({site.url_for('kiss')})" in shirley.text


def test_escaping_and_odd_ids():
    with LocalSite(DOCS) as site:
        url = site.url_for("odd/id ü?#")
        assert "/doc/odd%2Fid%20%C3%BC%3F%23" in url
        page = site.browser().browse(url)
        assert page.ok, page.error
        assert "# <script>alert('x')</script> & Co" in page.text  # shown as text, not run
        assert "Text with <b>markup</b> & ampersands." in page.text


def test_index_404_and_methods():
    docs = [Document(str(i), f"Title {i}", f"text {i}") for i in range(250)]
    with LocalSite(docs) as site:
        browser = site.browser()
        index = browser.browse(site.base_url + "/")
        assert "# All pages (1 of 3)" in index.text and "[Title 99]" in index.text
        assert "[Next page]" in index.text
        last = browser.browse(site.base_url + "/?page=3")
        assert "[Title 249]" in last.text and "Next page" not in last.text
        assert "(3 of 3)" in browser.browse(site.base_url + "/?page=999").text
        assert "(1 of 3)" in browser.browse(site.base_url + "/?page=abc").text
        assert "HTTP 404" in (browser.browse(site.base_url + "/doc/nope").error or "")
        assert "HTTP 404" in (browser.browse(site.base_url + "/etc/passwd").error or "")
        assert requests.head(site.url_for("1"), timeout=5).status_code == 200
        assert requests.post(site.url_for("1"), timeout=5).status_code == 501
        assert requests.get(site.base_url + "/" + "a" * 5000, timeout=5).status_code == 414


def test_search_results_carry_site_urls_end_to_end(tmp_path):
    with LocalSite(DOCS) as site:
        engine = LocalSearch(site.documents, cache_dir=tmp_path)
        box = Toolbox([search_tool(engine)])
        hit = engine.search("who voiced Corliss Archer on the radio", 1)[0]
        assert hit.url == site.url_for("waldo")
        assert "Janet Waldo voiced" in site.browser().browse(hit.url).text
        text = box.run(
            '<tool_call>{"name": "search", "arguments": {"query": "diplomat"}}</tool_call>'
        )
        assert site.url_for("shirley") in text[0].content
    # Same corpus at another port: new URLs, same cached index.
    with LocalSite(DOCS) as other:
        again = LocalSearch(other.documents, cache_dir=tmp_path)
        assert again.index_path == engine.index_path
        assert again.search("diplomat", 1)[0].url == other.url_for("shirley")


def test_stops_with_the_block_and_the_browser_says_so():
    with LocalSite(DOCS) as site:
        port = site.port
        url = site.url_for("kiss")
        browser = site.browser(timeout=2)
        assert site.running
    assert not site.running and refused(port)
    with pytest.raises(InfrastructureError, match="local web"):
        browser.browse(url)  # the offline web went down: our failure, not the agent's
    with pytest.raises(RuntimeError, match="not running"):
        _ = site.base_url


@pytest.mark.slow  # 10 s in the fast loop at load 17 (#22)
def test_stops_when_idle_or_collected():
    site = LocalSite(DOCS, idle_timeout=0.5).start()
    port = site.port
    deadline = time.monotonic() + 20
    while site.running and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not site.running and refused(port)

    dropped = LocalSite(DOCS).start()
    port = dropped.port
    del dropped
    gc.collect()
    assert refused(port)


def test_stop_and_start_are_idempotent():
    site = LocalSite(DOCS)
    site.stop()
    assert site.start() is site.start()
    site.stop()
    site.stop()
    assert not site.running


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::1", "8.8.8.8"])
def test_only_loopback(host):
    with pytest.raises(ValueError, match="loopback"):
        LocalSite(DOCS, host=host)


def test_bad_corpora():
    with pytest.raises(DataError, match="empty"):
        LocalSite([])
    with pytest.raises(DataError, match="twice"):
        LocalSite([DOCS[0], DOCS[0]])


def test_concurrent_browsing():
    import threading

    docs = [Document(str(i), f"Page {i}", f"body {i}") for i in range(40)]
    with LocalSite(docs) as site:
        browser = site.browser()
        failures: list[str] = []

        def read(i: int) -> None:
            page = browser.browse(site.url_for(str(i)))
            if not page.ok or f"body {i}" not in page.text:
                failures.append(str(page.error))

        threads = [threading.Thread(target=read, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []


def test_the_sites_browser_reaches_the_site_and_no_other_local_port():
    with LocalSite(DOCS) as site, LocalSite(DOCS[:1]) as other:
        browser = site.browser()
        assert site.browse_config().allowed_ports == (site.port,)
        assert browser.browse(site.url_for("kiss")).ok
        for url in (other.url_for("shirley"), f"http://localhost:{other.port}/"):
            page = browser.browse(url)
            assert page.error is not None and f"port {other.port} of " in page.error
