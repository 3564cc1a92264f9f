"""Fetching remote pod templates: limits, caching on the injected clock, safe messages."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable

import pytest
import requests
import responses

from elastic_agent.clock import ManualClock
from elastic_agent.pool.remote_file import RemoteFileError, RemoteFileFetcher
from profiles.values import safe_url

URL = "https://templates.example.com/pods/agent.yaml"
SECRET_URL = URL + "?token=s3cr3t#frag"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@responses.activate
def test_fetch_returns_the_body_text(clock: ManualClock) -> None:
    responses.get(URL, body="kind: Pod\n")
    assert RemoteFileFetcher(clock).fetch(URL) == "kind: Pod\n"


@responses.activate
def test_utf8_bom_is_dropped(clock: ManualClock) -> None:
    responses.get(URL, body="\ufeffkind: Pod".encode())
    assert RemoteFileFetcher(clock).fetch(URL) == "kind: Pod"


class Later:
    """A `Background` the test runs by hand."""

    def __init__(self) -> None:
        self.queued: list[Callable[[], None]] = []

    def submit(self, what: str, work: Callable[[], None]) -> None:
        self.queued.append(work)

    def stop(self, deadline: float) -> None:
        pass

    def run(self) -> None:
        while self.queued:
            self.queued.pop(0)()


@responses.activate
def test_a_copy_older_than_the_ttl_is_served_at_once_and_refreshed_in_the_background(
    clock: ManualClock,
) -> None:
    responses.get(URL, body="first")
    later = Later()
    fetcher = RemoteFileFetcher(clock, ttl_s=300, background=later)
    assert fetcher.fetch(URL) == "first"
    responses.replace(responses.GET, URL, body="second")
    clock.advance(299)
    assert fetcher.fetch(URL) == "first" and later.queued == []
    clock.advance(1)
    assert fetcher.fetch(URL) == "first"  # no wait: the refresh is queued
    assert fetcher.fetch(URL) == "first" and len(later.queued) == 1  # queued once
    later.run()
    assert fetcher.fetch(URL) == "second"
    assert len(responses.calls) == 2


@responses.activate
def test_a_refresh_that_fails_keeps_the_copy_and_says_so_until_one_works(clock: ManualClock) -> None:
    responses.get(URL + "?token=s3cr3t", body="kind: Pod")
    later = Later()
    fetcher = RemoteFileFetcher(clock, ttl_s=300, background=later)
    assert fetcher.fetch(URL + "?token=s3cr3t") == "kind: Pod"
    responses.replace(responses.GET, URL + "?token=s3cr3t", body=requests.exceptions.ConnectionError("down"))
    for _ in range(12):  # an hour with the host down
        clock.advance(300)
        assert fetcher.fetch(URL + "?token=s3cr3t") == "kind: Pod"
        later.run()
    [(shown, (message, since))] = fetcher.problems().items()
    assert shown == URL and "s3cr3t" not in message
    assert message.startswith(f"The pod template at {URL} cannot be refreshed since ")
    assert "could not connect to the server" in message and since == clock.now() - 3300
    responses.replace(responses.GET, URL + "?token=s3cr3t", body="kind: Pod # fixed")
    clock.advance(300)
    fetcher.fetch(URL + "?token=s3cr3t")
    later.run()
    assert fetcher.problems() == {} and fetcher.fetch(URL + "?token=s3cr3t") == "kind: Pod # fixed"


@responses.activate
def test_a_first_fetch_that_may_not_wait_is_started_in_the_background(clock: ManualClock) -> None:
    responses.get(URL, body="kind: Pod")
    later = Later()
    fetcher = RemoteFileFetcher(clock, background=later)
    with pytest.raises(RemoteFileError, match=f"the pod template at {URL} is being fetched"):
        fetcher.fetch(URL, wait=False)
    with pytest.raises(RemoteFileError):
        fetcher.fetch(URL, wait=False)
    assert len(later.queued) == 1 and len(responses.calls) == 0
    later.run()
    assert fetcher.fetch(URL, wait=False) == "kind: Pod"


@responses.activate
def test_cache_is_per_url(clock: ManualClock) -> None:
    responses.get(URL, body="a")
    responses.get(URL + "?v=2", body="b")
    fetcher = RemoteFileFetcher(clock)
    assert (fetcher.fetch(URL), fetcher.fetch(URL + "?v=2")) == ("a", "b")


@responses.activate
def test_failures_are_not_cached(clock: ManualClock) -> None:
    responses.get(URL, status=500)
    fetcher = RemoteFileFetcher(clock)
    with pytest.raises(RemoteFileError, match="HTTP 500"):
        fetcher.fetch(URL)
    responses.replace(responses.GET, URL, body="fixed")
    assert fetcher.fetch(URL) == "fixed"


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/pod.yaml", "pod.yaml", "", "http://[::1"]
)
def test_only_http_and_https_urls_are_fetched(clock: ManualClock, url: str) -> None:
    with pytest.raises(RemoteFileError, match=r"only http:// and https://|cannot fetch"):
        RemoteFileFetcher(clock).fetch(url)


@responses.activate
def test_declared_size_over_the_limit_is_refused(clock: ManualClock) -> None:
    responses.get(URL, body="x" * 2000)
    with pytest.raises(RemoteFileError, match="larger than the limit of 1000 bytes"):
        RemoteFileFetcher(clock, max_bytes=1000).fetch(URL)


@responses.activate
def test_size_limit_is_enforced_while_streaming_without_a_length(clock: ManualClock) -> None:
    # A reader body is streamed by `responses` without a Content-Length header.
    responses.get(URL, body=io.BufferedReader(io.BytesIO(b"x" * 10_000)), auto_calculate_content_length=False)
    with pytest.raises(RemoteFileError, match="larger than the limit"):
        RemoteFileFetcher(clock, max_bytes=1000).fetch(URL)


@responses.activate
def test_file_exactly_at_the_limit_is_accepted(clock: ManualClock) -> None:
    responses.get(URL, body="x" * 1000)
    assert len(RemoteFileFetcher(clock, max_bytes=1000).fetch(URL)) == 1000


@responses.activate
def test_timeout_is_passed_to_requests_and_reported(clock: ManualClock) -> None:
    responses.get(URL, body=requests.exceptions.ReadTimeout(f"read timed out for {SECRET_URL}"))
    with pytest.raises(RemoteFileError, match="took longer than 3s") as error:
        RemoteFileFetcher(clock, timeout_s=3).fetch(SECRET_URL)
    assert "s3cr3t" not in str(error.value)


@responses.activate
def test_requests_gets_the_timeout(clock: ManualClock) -> None:
    seen: list[object] = []

    def callback(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        seen.append(request.req_kwargs["timeout"])  # type: ignore[attr-defined]
        return 200, {}, "ok"

    responses.add_callback(responses.GET, URL, callback=callback)
    RemoteFileFetcher(clock, timeout_s=4).fetch(URL)
    assert seen == [4]


@pytest.mark.parametrize(
    ("error", "fragment"),
    [
        (requests.exceptions.ConnectionError, "could not connect"),
        (requests.exceptions.SSLError, "TLS"),
        (requests.exceptions.TooManyRedirects, "too many redirects"),
        (requests.exceptions.ChunkedEncodingError, "ChunkedEncodingError"),
    ],
)
@responses.activate
def test_network_errors_are_explained_without_the_query_string(
    clock: ManualClock, error: type[Exception], fragment: str
) -> None:
    responses.get(URL, body=error(f"HTTPSConnectionPool: Max retries exceeded with url: {SECRET_URL}"))
    with pytest.raises(RemoteFileError) as raised:
        RemoteFileFetcher(clock).fetch(SECRET_URL)
    message = str(raised.value)
    assert fragment in message and URL in message
    assert "s3cr3t" not in message and "token" not in message and "frag" not in message


@responses.activate
def test_http_error_message_hides_query_and_credentials(clock: ManualClock) -> None:
    responses.get("https://user:pw@templates.example.com/pods/agent.yaml", status=403)
    with pytest.raises(RemoteFileError) as raised:
        RemoteFileFetcher(clock).fetch("https://user:pw@templates.example.com/pods/agent.yaml?token=s3cr3t")
    assert str(raised.value) == f"fetching {URL} failed: the server answered HTTP 403"


@responses.activate
def test_binary_content_is_refused(clock: ManualClock) -> None:
    responses.get(URL, body=b"\xff\xfe\x00garbage")
    with pytest.raises(RemoteFileError, match="not UTF-8"):
        RemoteFileFetcher(clock).fetch(URL)


def test_safe_url_keeps_scheme_host_port_and_path() -> None:
    assert (
        safe_url("https://u:p@Host.example.com:8443/a/b.yaml?x=1#y")
        == "https://host.example.com:8443/a/b.yaml"
    )


@responses.activate
def test_concurrent_fetches_of_one_url_download_once(clock: ManualClock) -> None:
    started = threading.Event()
    release = threading.Event()

    def slow(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        started.set()
        release.wait(5)
        return 200, {}, "body"

    responses.add_callback(responses.GET, URL, callback=slow)
    fetcher = RemoteFileFetcher(clock)
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(fetcher.fetch(URL))) for _ in range(8)]
    for thread in threads:
        thread.start()
    assert started.wait(5)
    release.set()
    for thread in threads:
        thread.join(5)
    assert results == ["body"] * 8
    assert len(responses.calls) == 1
