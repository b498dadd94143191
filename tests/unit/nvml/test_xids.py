"""The XID rule and NVIDIA's DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS overrides."""

from vgpu.adapters.nvml import APPLICATION_XIDS, XidFilter, xid_filter_from_env


def test_default_ignores_nvidias_application_xids_only() -> None:
    rule = xid_filter_from_env({})

    assert {13, 31, 43, 45, 68, 109} == APPLICATION_XIDS
    assert [x for x in (13, 31, 43, 45, 48, 68, 79, 94, 109) if rule.is_critical(x)] == [48, 79, 94]
    assert rule.checks_enabled


def test_disable_all_turns_checking_off_unless_something_is_enabled() -> None:
    assert not xid_filter_from_env({"DP_DISABLE_HEALTHCHECKS": "all"}).checks_enabled
    only_48 = xid_filter_from_env(
        {"DP_DISABLE_HEALTHCHECKS": "xids", "DP_ENABLE_HEALTHCHECKS": "48"}
    )
    assert only_48.checks_enabled
    assert [only_48.is_critical(x) for x in (48, 79)] == [True, False]


def test_enable_all_counts_every_xid() -> None:
    rule = xid_filter_from_env({"DP_DISABLE_HEALTHCHECKS": "79", "DP_ENABLE_HEALTHCHECKS": "all"})

    assert all(rule.is_critical(x) for x in (13, 79, 109))


def test_empty_items_and_spaces_are_tolerated() -> None:
    rule = xid_filter_from_env({"DP_DISABLE_HEALTHCHECKS": " 79 ,, "})

    assert rule.ignored == APPLICATION_XIDS | {79}


def test_describe_says_what_the_log_needs() -> None:
    assert XidFilter().describe() == "ignoring XIDs 13,31,43,45,68,109"
    assert "disabled" in xid_filter_from_env({"DP_DISABLE_HEALTHCHECKS": "all"}).describe()
    env = {"DP_DISABLE_HEALTHCHECKS": "all", "DP_ENABLE_HEALTHCHECKS": "48,79"}
    assert xid_filter_from_env(env).describe() == "only XIDs 48,79 mark a GPU unhealthy"
