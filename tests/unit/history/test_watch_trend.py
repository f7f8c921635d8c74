"""The trend judgement of the watch list on pure series: drift watched, noise and flat counters left alone."""

from __future__ import annotations

import random

import pytest

from diagnose.history.watch_trend import HORIZON, MIN_POINTS, Series, judge, judge_fleet, judge_groups

NIGHTS = tuple(float(n) for n in range(30))
MODEL = "NVIDIA H100 80GB HBM3"


def _level(component: str, values: list[float], worse: int = -1, limit: float | None = None) -> Series:
    return Series(
        component, "gpu.gemm_tflops", MODEL, NIGHTS[: len(values)], tuple(values), "level", worse, limit
    )


def _counter(component: str, values: list[float], limit: float | None = None) -> Series:
    return Series(
        component,
        "gpu.ecc_corrected_aggregate",
        MODEL,
        NIGHTS[: len(values)],
        tuple(values),
        "counter",
        1,
        limit,
    )


def _noisy(rng: random.Random, center: float, spread: float) -> list[float]:
    return [rng.gauss(center, spread) for _ in NIGHTS]


def _healthy_gemm(rng: random.Random, count: int) -> list[Series]:
    return [_level(f"gpu:{n}", _noisy(rng, 700.0, 3.5)) for n in range(count)]


def test_a_gpu_losing_gemm_night_after_night_is_watched_and_its_noisy_peers_are_not() -> None:
    rng = random.Random(7)
    peers = _healthy_gemm(rng, 31)
    drifting = _level("gpu:sick", [700.0 - 4.0 * max(0, n - 16) + rng.gauss(0, 3.5) for n in range(30)])
    watches = judge_fleet([*peers, drifting])
    assert [w.component for w in watches] == ["gpu:sick"]
    (watch,) = watches
    assert watch.slope_per_night < 0
    assert watch.versus_fleet is not None and watch.versus_fleet > 6
    assert watch.nights == 13
    assert "gpu.gemm_tflops went from" in watch.reason


@pytest.mark.parametrize("seed", range(5))
def test_a_noisy_healthy_fleet_gives_no_entry(seed: int) -> None:
    rng = random.Random(seed)
    fleet = _healthy_gemm(rng, 64)
    fleet += [_counter(f"gpu:{n}", [float(n % 3)] * 30) for n in range(64)]
    assert judge_fleet(fleet) == []


def test_a_counter_that_stays_flat_is_never_watched_even_near_its_limit() -> None:
    flat = _counter("gpu:flat", [60.0] * 30, limit=64.0)
    peers = [_counter(f"gpu:{n}", [0.0] * 30) for n in range(8)]
    assert judge(flat, peers) is None


def test_a_counter_reset_starts_over_instead_of_reading_as_a_trend() -> None:
    steady = [10.0 * n for n in range(22)]
    cleared = steady + [10.0 * n for n in range(8)]
    peers = [_counter(f"gpu:{n}", [0.0] * 30) for n in range(8)]
    assert judge(_counter("gpu:cleared", cleared), peers) is None
    old_part = [5000.0 + n for n in range(18)]
    new_part = [float(sum(round(2 * 1.4**k) for k in range(n + 1))) for n in range(12)]
    watch = judge(_counter("gpu:replaced", old_part + new_part), peers)
    assert watch is not None
    assert watch.first == new_part[0] and watch.nights == 11
    assert judge(_counter("gpu:climbing", [float(n * n) for n in range(30)]), peers) is not None


def test_the_projection_of_a_linear_ramp_reaches_the_limit_when_the_line_does() -> None:
    ramp = _level("cable:MT1", [50.0 + 0.5 * n for n in range(30)], worse=1, limit=75.0)
    watch = judge(ramp)
    assert watch is not None
    assert watch.slope_per_night == pytest.approx(0.5)
    assert watch.nights_to_limit == pytest.approx((75.0 - 64.5) / 0.5)
    assert watch.versus_fleet is None
    far = _level("cable:MT2", [50.0 + 0.1 * n for n in range(30)], worse=1, limit=75.0)
    assert HORIZON < (75.0 - 52.9) / 0.1
    assert (
        judge(far, [_level(f"cable:{n}", [50.0 + 0.1 * n for n in range(30)], worse=1) for n in range(8)])
        is None
    )


def test_a_counter_rising_where_its_peers_sit_still_stands_out_and_a_steady_fleet_rate_does_not() -> None:
    growing = [float(sum(round(2 * 1.2**k) for k in range(n + 1))) for n in range(30)]
    rising = _counter("gpu:bad", growing)
    quiet = [_counter(f"gpu:{n}", [0.0] * 30) for n in range(15)]
    watch = judge(rising, quiet)
    assert watch is not None and watch.versus_fleet is None  # no spread among its peers to count in
    assert "its 15 peers stayed flat" in watch.reason
    assert watch.acceleration > 0
    assert "accelerating" in watch.reason
    same = [_counter(f"gpu:{n}", growing) for n in range(15)]
    assert judge(rising, same) is None
    steady = _counter("gpu:steady", [20.0 * n + (n % 3) for n in range(30)])
    assert judge(steady, quiet) is None


def test_one_wild_night_and_one_burst_are_steps_not_trends() -> None:
    rng = random.Random(3)
    peers = _healthy_gemm(rng, 31)
    hogged = _level("gpu:hog", [*_noisy(rng, 700.0, 3.5)[:29], 311.0])
    burst = _counter("gpu:burst", [0.0] * 25 + [40.0] * 5)
    quiet = [_counter(f"gpu:{n}", [0.0] * 30) for n in range(15)]
    assert judge_fleet([*peers, hogged]) == []
    assert judge(burst, quiet) is None


def test_missing_nights_and_epoch_days_leave_the_judgement_alone() -> None:
    rng = random.Random(11)
    days = [19700.0 + n + rng.uniform(0.0, 0.2) for n in range(30)]
    kept = [n for n in range(30) if n not in (24, 27)]

    def series(component: str, values: list[float]) -> Series:
        return Series(
            component,
            "cable.temperature_c",
            "T-F4GS-BV0",
            tuple(days[n] for n in kept),
            tuple(values[n] for n in kept),
            "level",
            1,
            75.0,
        )

    warming = series("cable:hot", [54.0 + 0.8 * max(0, n - 12) + rng.gauss(0, 0.7) for n in range(30)])
    peers = [series(f"cable:{n}", _noisy(rng, 54.0, 0.7)) for n in range(20)]
    watches = judge_fleet([*peers, warming])
    assert [w.component for w in watches] == ["cable:hot"]
    assert watches[0].nights_to_limit is not None and 0 < watches[0].nights_to_limit < HORIZON


def _port(component: str, values: list[float]) -> Series:
    nights = tuple(float(n) for n in range(len(values)))
    return Series(component, "ib.symbol_error", "MT4129", nights, tuple(values), "counter", 1)


def test_eight_nights_of_a_climb_among_flat_peers_are_enough_to_be_watched() -> None:
    # six hosts whose nightly began eight nights ago: the older half of the 14-night window is empty, the
    # series' own first four readings are its past
    ecc = [0.0, 3.0, 10.0, 30.0, 80.0, 200.0, 500.0, 1200.0]
    peers = [_counter(f"gpu:{n}", [float(n % 4)] * 8) for n in range(47)]
    watches = judge_fleet([*peers, _counter("gpu:bad", ecc)])
    assert [w.component for w in watches] == ["gpu:bad"]
    assert watches[0].acceleration > 0 and "accelerating" in watches[0].reason
    symbols = [0.0, 4.0, 15.0, 60.0, 180.0, 500.0, 1200.0, 2500.0]
    ports = [_port(f"port:{n}", [7.0] * 8) for n in range(47)]
    assert [w.component for w in judge_fleet([*ports, _port("port:bad", symbols)])] == ["port:bad"]
    assert judge(_counter("gpu:young", ecc[: MIN_POINTS - 1]), peers) is None


def test_a_counter_gaining_the_same_every_night_is_listed_apart_and_a_later_rise_is_judged_on_its_rate() -> (
    None
):
    steady = _port("port:steady", [10.0 * n for n in range(16)])
    others = [_port(f"port:{n}", [float(n % 5 == 0) * 3.0 * k for k in range(16)]) for n in range(2)]
    flat = [_port(f"port:flat{n}", [2.0] * 16) for n in range(93)]
    found = judge_groups([steady, *others, *flat])
    assert found.watched == []
    counting = {s.component: s for s in found.steady}
    assert set(counting) == {"port:steady", "port:0"}
    entry = counting["port:steady"]
    assert (entry.rate_per_night, entry.nights, entry.fleet_steady, entry.fleet) == (10.0, 13, 2, 96)
    assert entry.words == "counting steadily: +10 a night for 13 nights; 2 ports of 96 do"
    rising = _port("port:steady", [10.0 * n for n in range(16)] + [150.0 + 25.0 * k for k in range(1, 6)])
    longer = [_port(f"port:flat{n}", [2.0] * 21) for n in range(93)]
    (watch,) = judge_groups([rising, *longer]).watched
    assert "it counted +10 a night before, +25 now" in watch.reason


def test_peers_that_all_read_the_same_every_night_are_said_in_words() -> None:
    def cable(component: str, values: list[float]) -> Series:
        nights = tuple(float(n) for n in range(len(values)))
        return Series(component, "cable.temperature_c", "T-F4GS-BV0", nights, tuple(values), "level", 1)

    peers = [cable(f"cable:{n}", [54.0] * 16) for n in range(20)]
    (watch,) = judge_fleet([*peers, cable("cable:hot", [54.0 + 0.5 * n for n in range(16)])])
    assert watch.reason.endswith("(+0.5 per night); its 20 peers stayed flat")
    assert "deviations" not in watch.reason and watch.versus_fleet is None


def test_six_nights_are_not_projected_thirty_nights_ahead_but_a_near_crossing_is_watched() -> None:
    rng = random.Random(5)

    def cable(component: str, values: list[float]) -> Series:
        nights = tuple(float(n) for n in range(len(values)))
        return Series(component, "cable.temperature_c", "T-F4GS-BV0", nights, tuple(values), "level", 1, 75.0)

    peers = [cable(f"cable:{n}", [54.0 + rng.gauss(0, 0.7) for _ in range(6)]) for n in range(40)]
    warm = cable("cable:warm", [54.0 + 0.8 * n + rng.gauss(0, 0.2) for n in range(6)])  # ~25 nights out
    hot = cable("cable:hot", [64.0 + 2.0 * n for n in range(6)])
    assert [w.component for w in judge_fleet([*peers, warm, hot])] == ["cable:hot"]
