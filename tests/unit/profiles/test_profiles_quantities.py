"""Durations, memory sizes and CPU amounts as people type them."""

from __future__ import annotations

import pytest

from profiles.quantities import format_duration, parse_cpu, parse_duration, parse_memory


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("2h", 7200),
        ("1h30m", 5400),
        ("1d", 86400),
        ("500ms", 0.5),
        (" 10m ", 600),
        ("1.5h", 5400),
        ("2H", 7200),
        ("0s", 0),
    ],
)
def test_durations_with_units_become_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_bare_number_duration_means_minutes() -> None:
    assert parse_duration("10") == 600
    assert parse_duration("0.5") == 30


def test_bare_number_unit_can_be_chosen_by_the_field() -> None:
    assert parse_duration("10000", bare_unit_seconds=0.001) == 10


@pytest.mark.parametrize("text", ["10x", "", "m", "-5m", "30m1h", "1h1h", "ten minutes", "1e3", "nan", "inf"])
def test_malformed_duration_is_explained(text: str) -> None:
    with pytest.raises(
        ValueError, match="is not a duration: write 30s, 10m or 2h; a bare number means minutes"
    ):
        parse_duration(text)


def test_duration_message_quotes_what_was_typed() -> None:
    with pytest.raises(ValueError) as error:
        parse_duration("10x")
    assert str(error.value) == "'10x' is not a duration: write 30s, 10m or 2h; a bare number means minutes"


@pytest.mark.parametrize(("seconds", "text"), [(600, "10m"), (5400, "1h30m"), (0, "0s"), (0.5, "0.5s")])
def test_durations_format_back_to_their_shortest_spelling(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("text", "quantity", "size"),
    [
        ("512Mi", "512Mi", 512 * 1024**2),
        ("2Gi", "2Gi", 2 * 1024**3),
        ("1G", "1Gi", 1024**3),
        ("1024M", "1Gi", 1024**3),
        ("1024MB", "1Gi", 1024**3),
        ("1536Mi", "1536Mi", 1536 * 1024**2),
        ("1.5Gi", "1536Mi", 1536 * 1024**2),
        ("1000", "1000", 1000),
        ("2048", "2Ki", 2048),
        ("1Ti", "1Ti", 1024**4),
        (" 256 mi ", "256Mi", 256 * 1024**2),
    ],
)
def test_memory_sizes_normalize_to_kubernetes_quantities(text: str, quantity: str, size: int) -> None:
    memory = parse_memory(text)
    assert (memory.quantity, memory.bytes) == (quantity, size)


def test_memory_suffixes_count_in_1024s_like_the_official_plugin() -> None:
    assert parse_memory("1G").bytes == parse_memory("1Gi").bytes == parse_memory("1024M").bytes


def test_fractional_bytes_round_up_as_kubernetes_does() -> None:
    assert parse_memory("0.5K").bytes == 512
    assert parse_memory("0.0001K").bytes == 1


@pytest.mark.parametrize("text", ["10x", "", "Mi", "1 G B", "-1G", "1,5G", "1Pi"])
def test_malformed_memory_size_is_explained(text: str) -> None:
    with pytest.raises(ValueError, match="is not a memory size: write 512Mi, 1Gi, 1024M"):
        parse_memory(text)


def test_zero_memory_is_refused() -> None:
    with pytest.raises(ValueError, match="more than zero"):
        parse_memory("0Mi")


@pytest.mark.parametrize(
    ("text", "quantity", "millicores"),
    [
        ("0.5", "500m", 500),
        ("500m", "500m", 500),
        ("2", "2", 2000),
        ("1.0", "1", 1000),
        ("1500m", "1500m", 1500),
        ("2000m", "2", 2000),
        (".25", "250m", 250),
        ("0.001", "1m", 1),
    ],
)
def test_cpu_amounts_normalize_to_kubernetes_quantities(text: str, quantity: str, millicores: int) -> None:
    cpu = parse_cpu(text)
    assert (cpu.quantity, cpu.millicores) == (quantity, millicores)


@pytest.mark.parametrize("text", ["two", "", "1.5m", "-1", "1 core", "m", "0x10"])
def test_malformed_cpu_amount_is_explained(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a CPU amount: write 0\.5, 500m or 2"):
        parse_cpu(text)


def test_cpu_finer_than_a_millicore_is_refused() -> None:
    with pytest.raises(ValueError, match="smallest CPU step is 1m"):
        parse_cpu("0.0005")


@pytest.mark.parametrize("text", ["0", "0m", "0.0"])
def test_zero_cpu_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="more than zero"):
        parse_cpu(text)
