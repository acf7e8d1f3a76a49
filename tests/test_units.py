import pytest

from dak.units import format_bandwidth, format_bytes, format_time, parse_ratio, parse_size


@pytest.mark.parametrize("text,expected", [
    ("40GiB", 40 * 2**30), ("40GB", 40 * 10**9), ("40G", 40 * 2**30), ("512MiB", 512 * 2**20),
    ("512MB", 512 * 10**6), ("1.5TiB", int(1.5 * 2**40)), ("2TB", 2 * 10**12), ("3KiB", 3072),
    ("3KB", 3000), ("3K", 3072), ("7M", 7 * 2**20), ("1T", 2**40), ("1024", 1024), (" 8 gib ", 8 * 2**30),
    ("0", 0), ("100B", 100), (4096, 4096), (40e9, 40 * 10**9), (2.0, 2),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["forty", "", "40XB", "GiB", "1.5", "-3GiB", "4 0GiB", "nan"])
def test_parse_size_errors(bad):
    with pytest.raises(ValueError, match="cannot parse size .*40GiB"):
        parse_size(bad)


@pytest.mark.parametrize("bad", [1.5, 0.05, 40e9 + 0.5])
def test_parse_size_refuses_fractional_byte_counts(bad):
    """A float byte count with a fraction (hbm_budget=1.5 meaning 1.5 GiB, or a share) was rounded to bytes."""
    with pytest.raises(ValueError, match="must be whole .*GiB'"):
        parse_size(bad)


@pytest.mark.parametrize("text,expected", [("5%", 0.05), ("0.05", 0.05), ("100%", 1.0), ("0", 0.0), (0.25, 0.25)])
def test_parse_ratio(text, expected):
    assert parse_ratio(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["five", "150%", "1.2", "-0.1", "%"])
def test_parse_ratio_errors(bad):
    with pytest.raises(ValueError, match="cannot parse ratio .*5%"):
        parse_ratio(bad)


def test_format():
    assert format_bytes(1.5 * 2**30) == "1.50 GiB"
    assert format_bytes(512) == "512 B"
    assert format_time(0.0015) == "1.500 ms"
    assert format_time(2.5) == "2.500 s"
    assert format_time(3e-6) == "3.00 us"
    assert format_bandwidth(50.5e9) == "50.50 GB/s"
    assert format_bandwidth(3.7e12) == "3.70 TB/s"
