"""The pod cache's rules of which version of a pod it shows (elastic_agent/kube/pod_cache.py), fed as the
adapter feeds it: a list, the watch's events in the server's order, and the responses of our writes.

ResourceVersions here are opaque strings whose order as text or as numbers says nothing, as client-go's
informers assume (`k8s.io/client-go/tools/cache`: the store takes each delta as the reflector delivers
it; resourceVersion is only ever passed back to the server or compared for equality)."""

from __future__ import annotations

from typing import Any

from elastic_agent.clock import ManualClock
from elastic_agent.kube.pod_cache import LOCAL_TTL_S, PodCache

OURS = {"reuse.gocd.org/server-id": "server-1"}


def pod(name: str, version: str, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "resourceVersion": version,
            "labels": dict(OURS),
            "annotations": annotations,
        },
        "status": {"phase": "Pending"},
    }


def cache_and_heard() -> tuple[PodCache, list[tuple[str, str, str]], ManualClock]:
    clock = ManualClock()
    cache = PodCache(OURS, clock)
    heard: list[tuple[str, str, str]] = []
    cache.add_listener(lambda kind, view: heard.append((kind, view.name, view.resource_version)))
    return cache, heard, clock


def version(cache: PodCache, name: str) -> str | None:
    view = cache.get(name)
    return view.resource_version if view is not None else None


def test_the_watch_decides_the_order_whatever_the_versions_look_like() -> None:
    cache, heard, _ = cache_and_heard()
    cache.replace([pod("a", "9")], started=cache.mark())
    cache.apply("MODIFIED", pod("a", "10"))
    cache.apply("MODIFIED", pod("a", "8"))  # newer, because the watch delivers it later
    cache.apply("MODIFIED", pod("a", "0x3"))
    assert version(cache, "a") == "0x3"
    assert heard == [("ADDED", "a", "9"), ("MODIFIED", "a", "10"), ("MODIFIED", "a", "8"),
                     ("MODIFIED", "a", "0x3")]  # fmt: skip


def test_a_write_is_shown_until_the_watch_delivers_its_version_and_older_events_do_not_roll_it_back() -> None:
    cache, heard, _ = cache_and_heard()
    cache.replace([pod("a", "k1")], started=cache.mark())
    with cache.writing("a") as write:
        shown = write.took(pod("a", "k3", state="busy"))
    assert shown.annotations == {"state": "busy"} and version(cache, "a") == "k3"
    cache.apply("MODIFIED", pod("a", "k2"))  # the kubelet's change before our write: older
    assert version(cache, "a") == "k3"
    cache.apply("MODIFIED", pod("a", "k3", state="busy"))  # the watch reaches our write
    cache.apply("MODIFIED", pod("a", "k0", state="busy"))  # and what comes after it is newer
    assert version(cache, "a") == "k0"
    assert heard == [("ADDED", "a", "k1"), ("MODIFIED", "a", "k3"), ("MODIFIED", "a", "k0")]


def test_a_write_response_the_watch_already_delivered_is_not_taken_over_what_came_after_it() -> None:
    cache, _, _ = cache_and_heard()
    cache.replace([pod("a", "v1")], started=cache.mark())
    with cache.writing("a") as write:
        cache.apply("MODIFIED", pod("a", "v2", state="idle"))  # our write, seen by the watch first
        cache.apply("MODIFIED", pod("a", "v3", state="idle"))  # then someone else's
        write.took(pod("a", "v2", state="idle"))
    assert version(cache, "a") == "v3"


def test_a_pod_our_delete_removed_stays_hidden_until_the_watch_says_it_is_deleted() -> None:
    cache, heard, _ = cache_and_heard()
    cache.replace([pod("a", "x")], started=cache.mark())
    with cache.writing("a") as write:
        write.removed()
    assert cache.get("a") is None and cache.retained() == {"tombstones": 1}
    cache.apply("MODIFIED", pod("a", "y"))  # from before the deletion
    assert cache.get("a") is None
    cache.apply("DELETED", pod("a", "z"))
    assert cache.get("a") is None and cache.retained() == {"tombstones": 0}
    assert heard == [("ADDED", "a", "x"), ("DELETED", "a", "x")]


def test_a_write_overtaken_by_the_pods_deletion_does_not_bring_it_back() -> None:
    cache, _, _ = cache_and_heard()
    cache.replace([pod("a", "x")], started=cache.mark())
    with cache.writing("a") as write:
        cache.apply("DELETED", pod("a", "z"))
        write.took(pod("a", "y", state="idle"))
    assert cache.get("a") is None and cache.pods() == []


def test_a_list_replaces_the_writes_completed_before_it_was_asked_for_but_not_those_after() -> None:
    cache, _, _ = cache_and_heard()
    cache.replace([pod("a", "1"), pod("b", "1")], started=cache.mark())
    with cache.writing("a") as write:
        write.took(pod("a", "2", state="busy"))
    started = cache.mark()  # the list is asked for now
    with cache.writing("b") as write:
        write.took(pod("b", "4", state="busy"))  # completes while the list is on its way
    with cache.writing("c") as write:
        write.took(pod("c", "5"))  # a pod created meanwhile, not in the list's snapshot
    cache.replace([pod("a", "3"), pod("b", "1")], started=started)
    assert (version(cache, "a"), version(cache, "b"), version(cache, "c")) == ("3", "4", "5")


def test_what_the_watch_never_confirms_is_forgotten_after_a_while_on_the_clock() -> None:
    cache, heard, clock = cache_and_heard()
    cache.replace([pod("a", "1"), pod("b", "1")], started=cache.mark())
    with cache.writing("a") as write:
        write.removed()
    with cache.writing("b") as write:
        write.took(pod("b", "2", state="idle"))
    clock.advance(LOCAL_TTL_S - 1)
    assert cache.retained() == {"tombstones": 1} and version(cache, "b") == "2"
    clock.advance(2)
    assert cache.retained() == {"tombstones": 0}
    assert [version(cache, "a"), version(cache, "b")] == ["1", "1"]  # what the watch says
    assert heard[-2:] == [("ADDED", "a", "1"), ("MODIFIED", "b", "1")]


def test_a_pod_relabelled_out_of_the_selector_is_deleted_for_the_cache() -> None:
    cache, heard, _ = cache_and_heard()
    cache.replace([pod("a", "1")], started=cache.mark())
    moved = pod("a", "2")
    moved["metadata"]["labels"] = {"reuse.gocd.org/server-id": "another"}
    cache.apply("MODIFIED", moved)
    assert cache.get("a") is None and heard[-1] == ("DELETED", "a", "1")
