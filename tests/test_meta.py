"""Result provenance: the git sha and the $DAK_* switches a benchmark JSON records."""

import shutil
import subprocess

import pytest

from dak.bench.meta import git_sha, metadata


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git command")
def test_git_sha_marks_a_tree_that_differs_from_head(tmp_path, monkeypatch):
    monkeypatch.delenv("DAK_GIT_SHA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert git_sha() == "unknown"  # not a repository
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run(["git", *env, "add", "a.py"], check=True)
    subprocess.run(["git", *env, "commit", "-qm", "one"], check=True)
    head = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], text=True).strip()
    assert git_sha() == head
    (tmp_path / "b.py").write_text("untracked files do not count\n")
    assert git_sha() == head
    (tmp_path / "a.py").write_text("x = 2\n")  # e.g. a newer tree copied over an old .git
    assert git_sha() == f"{head}-dirty"
    monkeypatch.setenv("DAK_GIT_SHA", "abc1234")
    assert git_sha() == "abc1234"


def test_metadata_records_the_switches_but_not_the_bookkeeping(monkeypatch):
    for k in [k for k in __import__("os").environ if k.startswith("DAK_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("DAK_CE_FORK", "0")
    monkeypatch.setenv("DAK_COPY_GROUP_MIB", "128")
    monkeypatch.setenv("DAK_GIT_SHA", "abc1234")
    monkeypatch.setenv("DAK_CACHE_DIR", "/tmp/x")
    meta = metadata()
    assert meta["env"] == {"DAK_CE_FORK": "0", "DAK_COPY_GROUP_MIB": "128"} and meta["git_sha"] == "abc1234"
