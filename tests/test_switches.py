"""dak.switches: the table of $DAK_* variables is complete and true, and bad settings are caught up front."""

import os
import re
from pathlib import Path

import pytest

from dak.cli.main import main
from dak.switches import BY_NAME, SWITCHES, bad_value, check_environment

SRC = Path(__file__).resolve().parents[1] / "src" / "dak"


def _sources():
    return {p: p.read_text() for p in SRC.rglob("*.py") if p.name != "switches.py"}


def test_every_variable_dak_reads_is_in_the_table_and_nothing_else():
    read = set()
    for text in _sources().values():
        read.update(re.findall(r'"(DAK_[A-Z0-9_]+)"', text))
    assert read == set(BY_NAME), (sorted(read - set(BY_NAME)), sorted(set(BY_NAME) - read))
    assert len(BY_NAME) == len(SWITCHES)


def test_on_off_defaults_match_their_readers():
    """Each env_flag("DAK_X", True/False) in the code has the table's default 1/0 (or a reader
    whose default follows another switch or the plan, which the table says in words)."""
    found = 0
    for path, text in _sources().items():
        for name, default in re.findall(r'env_flag\("(DAK_[A-Z0-9_]+)", (True|False|\w+)\)', text):
            s = BY_NAME[name]
            if default in ("True", "False"):
                found += 1
                if s.group == "plan":  # tri-state: env_flag only reads a value that is set
                    continue
                assert s.default == ("1" if default == "True" else "0"), (path.name, name)
            else:
                assert s.default not in ("0", "1"), (path.name, name, default)  # e.g. DAK_GEMV_SILU
    assert found >= 20


@pytest.mark.parametrize("name,raw,ok", [
    ("DAK_HBM_GEMV", "0", True), ("DAK_HBM_GEMV", "true", False), ("DAK_COPY_WRAP", "plan", True),
    ("DAK_COPY_WRAP", "2", False), ("DAK_CE_MIN_SHARE", "0.05", True), ("DAK_CE_MIN_SHARE", "1.5", False),
    ("DAK_CE_MIN_SHARE", "nan", False), ("DAK_CE_CHUNKS", "64", True), ("DAK_CE_CHUNKS", "+3", False),
    ("DAK_CE_CHUNKS", "65", False), ("DAK_COPY_SLOTS", "1", False), ("DAK_PIN_METHOD", "thp", True),
    ("DAK_PIN_METHOD", "mmap", False), ("DAK_CACHE_DIR", "/any/where", True),
])
def test_values_are_checked_as_their_readers_check_them(name, raw, ok, monkeypatch):
    """The table accepts exactly what the reader accepts: a value it refuses makes the reader raise."""
    assert (bad_value(BY_NAME[name], raw) is None) == ok
    readers = {"DAK_HBM_GEMV": "gemv_enabled", "DAK_COPY_WRAP": "copy_wrap_mode", "DAK_CE_MIN_SHARE": "ce_min_share",
               "DAK_CE_CHUNKS": "ce_chunks_default", "DAK_COPY_SLOTS": "copy_slot_count"}
    if name in readers:
        import dak.shares as sh
        monkeypatch.setenv(name, raw)
        if ok:
            getattr(sh, readers[name])()
        else:
            with pytest.raises(ValueError, match=name):
                getattr(sh, readers[name])()


def test_check_environment_warns_on_unknown_names_and_refuses_bad_values():
    warnings, errors = check_environment({"DAK_HBM_GEM": "0", "DAK_COPY_WRAP": "yes", "DAK_GRAPHS": "0",
                                          "PATH": "/bin", "DAK_ZZZ_QQQ": "1"})
    assert len(warnings) == 2 and "did you mean DAK_HBM_GEMV?" in warnings[0] and "DAK_ZZZ_QQQ" in warnings[1]
    assert "did you mean" not in warnings[1]
    assert len(errors) == 1 and errors[0].startswith("DAK_COPY_WRAP='yes': must be one of 0, 1, plan")
    assert check_environment({"DAK_GRAPHS": "0", "HOME": "/root"}) == ([], [])
    _, errors = check_environment({"DAK_GEMV_SILU": "1", "DAK_HBM_GEMV": "0"})  # the reader refuses it too
    assert len(errors) == 1 and "unset one of them" in errors[0]
    assert check_environment({"DAK_GEMV_SILU": "0", "DAK_HBM_GEMV": "0"}) == ([], [])


def test_dak_env_lists_every_switch_and_the_cli_checks_first(monkeypatch, capsys):
    for s in SWITCHES:
        monkeypatch.delenv(s.name, raising=False)
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert all(s.name in out for s in SWITCHES)
    monkeypatch.setenv("DAK_HBM_GEMV", "0")
    assert main(["env", "--set"]) == 0
    out = capsys.readouterr().out
    assert "DAK_HBM_GEMV" in out and "set '0'" in out and "DAK_GRAPHS" not in out
    monkeypatch.setenv("DAK_HBM_GEM", "1")  # a typo: every command warns, and still runs
    assert main(["models"]) == 0
    assert "did you mean DAK_HBM_GEMV?" in capsys.readouterr().err
    monkeypatch.setenv("DAK_COPY_SLOTS", "9")  # a bad value: refused before the command runs
    assert main(["plan", "--model", "tiny-llama"]) == 2
    captured = capsys.readouterr()
    assert "DAK_COPY_SLOTS='9': must be an integer in [2, 8]" in captured.err and captured.out == ""
    assert main(["env"]) == 2


def test_offload_refuses_a_bad_switch_before_building(monkeypatch):
    import dak
    monkeypatch.setenv("DAK_PIN_METHOD", "mmap")
    with pytest.raises(ValueError, match="DAK_PIN_METHOD='mmap': must be one of alloc"):
        dak.offload("tiny-llama", batch=1, max_len=8)


def test_every_moot_rule_names_real_switches_and_values_they_accept():
    from dak.switches import MOOT
    for need, why in MOOT:
        assert len(need) >= 2 and any(None not in values for values in need.values()), why
        for name, values in need.items():
            assert name in BY_NAME and name in why, (name, why)
            assert all(v is None or bad_value(BY_NAME[name], v) is None for v in values), (name, values)


@pytest.mark.parametrize("env,warned", [
    ({"DAK_COPY_WRAP": "plan", "DAK_CE_ONE_GEMV": "0"}, "nothing wraps"),
    ({"DAK_COPY_WRAP": "plan"}, None), ({"DAK_COPY_WRAP": "plan", "DAK_CE_ONE_GEMV": "1"}, None),
    ({"DAK_COPY_WRAP": "1", "DAK_GRAPHS": "0"}, "DAK_GRAPHS=0"),
    ({"DAK_CE_FORK": "1", "DAK_KV_AHEAD_FORK": "0"}, "DAK_KV_AHEAD_FORK=0 has no effect"),
    ({"DAK_CE_FORK": "1"}, None),
    ({"DAK_RESIDUAL_ADDMM": "1"}, "set DAK_DEFER_RESIDUAL=0"),
    ({"DAK_RESIDUAL_ADDMM": "1", "DAK_DEFER_RESIDUAL": "0"}, None),
    ({"DAK_RESIDUAL_ADDMM": "1", "DAK_FUSED_LAYER": "0"}, "DAK_FUSED_LAYER=0 turns off"),
    ({"DAK_OPT_QSCALE": "1", "DAK_FUSED_OPT": "0"}, "DAK_FUSED_OPT=0"),
    ({"DAK_FUSED_OPT": "0"}, None),
])
def test_a_switch_made_moot_by_another_is_a_warning_not_an_error(env, warned):
    warnings, errors = check_environment(env)
    assert errors == []
    if warned is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warned in warnings[0], warnings


def test_moot_rules_say_what_the_readers_do(monkeypatch):
    """Where a rule says a switch is overridden or unused, the code reading it agrees."""
    import torch

    import dak.shares as sh
    from dak.kernels.hbm_gemv import gemv_applies
    from dak.planner.overhead import EPILOGUES, epilogues_on
    for s in SWITCHES:
        monkeypatch.delenv(s.name, raising=False)
    silu, _, _, qscale = EPILOGUES
    assert epilogues_on()[silu] and epilogues_on()[qscale]
    monkeypatch.setenv("DAK_CE_FORK", "1")
    monkeypatch.setenv("DAK_KV_AHEAD_FORK", "0")
    monkeypatch.setenv("DAK_ATTENTION_CE_FORK", "0")
    assert sh.kv_ahead_fork_enabled() and sh.attention_ce_fork_enabled()
    monkeypatch.setenv("DAK_FUSED_LAYER", "0")
    monkeypatch.setenv("DAK_GEMV_SILU", "1")
    assert not epilogues_on()[silu]  # the planner charges no lost SiLU epilogue where none runs
    monkeypatch.setenv("DAK_FUSED_OPT", "0")
    monkeypatch.setenv("DAK_OPT_QSCALE", "1")
    assert not epilogues_on()[qscale]
    monkeypatch.setenv("DAK_HBM_GEMV", "0")
    monkeypatch.delenv("DAK_GEMV_SILU")
    monkeypatch.setenv("DAK_CE_ONE_GEMV", "1")
    with torch.no_grad():  # the one-GEMV path asks gemv_applies (dak.kernels.split_linear_ce._one_gemv)
        assert not gemv_applies(torch.zeros(2, 64, dtype=torch.bfloat16))


def test_thirty_fourth_session_defaults_and_runs_before_them(monkeypatch):
    """Unset, host K/V is priced as copied ahead and one-GEMV chains wrap ('plan'); a run recorded
    before that change re-plans with the old values (run_environ), unless it set them itself."""
    from dak.planner.overhead import roofline_kv_ahead
    from dak.shares import copy_wrap_mode
    from dak.switches import CHANGED, environment, run_environ
    for name in ("DAK_ROOFLINE_KV_AHEAD", "DAK_COPY_WRAP"):
        monkeypatch.delenv(name, raising=False)
    assert roofline_kv_ahead() is True and copy_wrap_mode() is None
    old = {"DAK_ROOFLINE_KV_AHEAD": "0", "DAK_COPY_WRAP": "0", "DAK_COPY_SLOTS": "2", "DAK_CONSOLIDATE_EXACT": "0",
           "DAK_CHAIN_ONE_CHUNK": "0"}
    since = max(s for _, _, s in CHANGED)
    assert run_environ(None, "2026-12-05T19:38:04") == old and run_environ({}, None) == old
    assert run_environ({"DAK_COPY_WRAP": "1", "DAK_HBM_GEMV": "0"}, "2026-12-01T00:00:00") == dict(
        old, DAK_COPY_WRAP="1", DAK_HBM_GEMV="0")
    assert run_environ({"DAK_HBM_GEMV": "0"}, since) == {"DAK_HBM_GEMV": "0"}  # made after: as it ran
    # between the changes: only the later ones' old values (the forty-first session's copy slots, the
    # forty-third's exact search, the forty-fourth's one memcpy per chained large-N operator)
    later = {"DAK_CONSOLIDATE_EXACT": "0", "DAK_CHAIN_ONE_CHUNK": "0"}
    assert run_environ(None, "2026-12-06T09:00:00") == dict(later, DAK_COPY_SLOTS="2")
    assert run_environ(None, "2026-12-06T12:00:00") == later
    assert run_environ(None, "2026-12-06T21:43:20") == {"DAK_CHAIN_ONE_CHUNK": "0"}  # H146, before the change
    with environment(run_environ(None, "2026-12-04T00:00:00")):
        assert roofline_kv_ahead() is False and copy_wrap_mode() is False
    assert roofline_kv_ahead() is True and "DAK_COPY_WRAP" not in os.environ  # restored


def test_a_plan_reads_the_switches_once_and_sees_later_changes_only_in_the_next_plan(monkeypatch):
    """dak.env_snapshot.fixed(): inside a plan dak.shares reads a snapshot (a million os.environ reads were a
    fifth of planning a 70B model); nested blocks keep the outer snapshot; outside, the environment as it is."""
    from dak.env_snapshot import fixed
    from dak.hardware import get_profile
    from dak.models import Workload, load_spec
    from dak.planner import plan
    from dak.shares import ce_min_share
    monkeypatch.setenv("DAK_CE_MIN_SHARE", "0.1")
    with fixed():
        monkeypatch.setenv("DAK_CE_MIN_SHARE", "0.3")
        with fixed():
            assert ce_min_share() == 0.1
        assert ce_min_share() == 0.1
    assert ce_min_share() == 0.3
    monkeypatch.delenv("DAK_CE_MIN_SHARE")
    assert ce_min_share() == 0.02
    spec, w, hw = load_spec("llama-2-7b"), Workload("decode", 8, 32, 32), get_profile("h200-pcie")
    budgets = {}
    for share in ("0", "1"):  # every host share by copy engine, or none: the plan prices them differently
        monkeypatch.setenv("DAK_CE_MIN_SHARE", share)
        budgets[share] = plan(spec, w, hw, 12 * 2**30, "greedy").predicted_s
    assert budgets["0"] != budgets["1"]


def test_an_empty_value_reads_as_unset(monkeypatch, capsys):
    """`DAK_X= dak ...` unsets DAK_X for one command (as Python reads its PYTHON* variables): every
    reader, the up-front check, `dak env`, the pinning method and the runs' metadata agree."""
    import inspect
    import dak.copy_shares as cs
    import dak.shares as sh
    from dak.bench.meta import dak_env
    from dak.cli.main import main
    from dak.env_snapshot import fixed
    from dak.host import pin_method
    from dak.switches import check_environment
    readers = [f for mod in (sh, cs) for n, f in vars(mod).items()
               if inspect.isfunction(f) and f.__module__ == mod.__name__ and not n.startswith("_")
               and all(p.default is not p.empty for p in inspect.signature(f).parameters.values())]
    assert len(readers) >= 20
    for s in SWITCHES:
        monkeypatch.delenv(s.name, raising=False)
    unset = [f() for f in readers]
    for s in SWITCHES:
        monkeypatch.setenv(s.name, "")
    assert [f() for f in readers] == unset
    with fixed():
        assert [f() for f in readers] == unset
    assert check_environment() == ([], [])
    assert pin_method() == "alloc" and dak_env() == {}
    assert main(["env", "--set"]) == 0 and capsys.readouterr().out == ""
    monkeypatch.setenv("DAK_COPY_SLOTS", "9")  # a value that is set is still checked
    assert check_environment()[1] and main(["env"]) == 2
