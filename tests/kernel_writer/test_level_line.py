"""The kernel writer report's level in one phrase, as the gate's headline and the
PR bot's commit status show it."""

from __future__ import annotations

from schemas.kernel_writer import ConfigCheck, PortReport, TargetCheck


def check(config: str, exact: bool, identical: tuple[bool, bool] = (True, True)) -> ConfigCheck:
    targets = [
        TargetCheck(target=target, sass_identical=same)
        for target, same in zip(("sm_90", "sm_100"), identical, strict=True)
    ]
    level = "exact" if exact else "equivalent"
    return ConfigCheck(
        config=config,
        variant="v",
        entry="e",
        generic_args=[],
        exact=exact,
        ir_level=level,
        targets=targets,
    )


def report(*checks: ConfigCheck) -> PortReport:
    return PortReport(
        kernel="k", spec="k.port.yaml", verdict="FAIL_FIXABLE", summary="x", checks=list(checks)
    )


def test_every_configuration_exact() -> None:
    assert report(check("a", True), check("b", True)).level_line() == (
        "IR exact, SASS-identical sm_90/sm_100"
    )


def test_some_configurations_sass_identical_only() -> None:
    line = report(check("a", True), check("b", False), check("c", True)).level_line()
    assert line == "IR exact on 2 of 3 configurations, SASS-identical sm_90/sm_100 on all 3"


def test_all_sass_identical_with_different_ir_text() -> None:
    assert report(check("a", False)).level_line() == "SASS-identical sm_90/sm_100 (IR text differs)"


def test_a_configuration_below_sass_identical_is_counted() -> None:
    line = report(check("a", True), check("b", False, (True, False))).level_line()
    assert line == "IR level of 2 configurations: 1 exact, 1 equivalent"


def test_no_check_no_level() -> None:
    assert report().level_line() is None
