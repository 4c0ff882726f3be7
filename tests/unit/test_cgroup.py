"""Finding where a call's memory cgroup is made, from /proc/self/cgroup and mountinfo, for
the layouts respond meets: cgroup v1 beside an empty v2 (this kind of host), a container
whose mount shows a group below the hierarchy's root, cgroup v2 with its memory controller
handed on, and neither. The control files are a folder of plain files here; the real
controller is in tests/e2e/test_sandbox_limits.py. Also the pool of sandbox users."""

from __future__ import annotations

from pathlib import Path

import pytest

from respond.containers import _cgroup
from respond.containers._sandbox import FIRST_UID, USERS, SandboxError, Users

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 {root} {mount}/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / {mount}/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / {mount}/unified rw,relatime - cgroup2 cgroup2 rw
"""
V2_MOUNTS = "41 23 0:38 / {mount} rw,relatime - cgroup2 cgroup2 rw\n"


def layout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cgroup: str, mounts: str, root: str = "/"
) -> Path:
    mount = tmp_path / "fs"
    (tmp_path / "cgroup").write_text(cgroup)
    (tmp_path / "mountinfo").write_text(mounts.format(mount=mount, root=root))
    monkeypatch.setattr(_cgroup, "PROC_CGROUP", tmp_path / "cgroup")
    monkeypatch.setattr(_cgroup, "MOUNTINFO", tmp_path / "mountinfo")
    return mount


def test_cgroup_v1_beside_an_empty_v2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mount = layout(
        monkeypatch, tmp_path, "8:pids:/\n4:memory:/jobs/a1\n0::/\n", V1_MOUNTS, root="/"
    )
    (mount / "memory" / "jobs" / "a1").mkdir(parents=True)
    (mount / "unified").mkdir()
    (mount / "unified" / "cgroup.controllers").write_text("hugetlb\n")
    assert _cgroup.find() == _cgroup.Memory(1, mount / "memory" / "jobs" / "a1")


def test_a_mount_showing_a_group_below_the_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A container's mount shows its own group (root /docker/c1) at the mount point."""
    mount = layout(monkeypatch, tmp_path, "4:memory:/docker/c1/app\n", V1_MOUNTS, root="/docker/c1")
    (mount / "memory" / "app").mkdir(parents=True)
    assert _cgroup.find() == _cgroup.Memory(1, mount / "memory" / "app")
    (tmp_path / "cgroup").write_text("4:memory:/elsewhere\n")
    assert "outside the mounted one" in str(_cgroup.find())


def test_cgroup_v2_with_memory_handed_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mount = layout(monkeypatch, tmp_path, "0::/respond.service\n", V2_MOUNTS)
    here = mount / "respond.service"
    here.mkdir(parents=True)
    (here / "cgroup.controllers").write_text("cpu memory pids\n")
    (here / "cgroup.subtree_control").write_text("memory\n")
    memory = _cgroup.find()
    assert memory == _cgroup.Memory(2, here)
    group = memory.group(1 << 30)
    assert group.path.parent == here
    assert (group.path / "memory.max").read_text() == str(1 << 30)


def test_no_memory_controller_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mount = layout(monkeypatch, tmp_path, "0::/\n", V2_MOUNTS)
    mount.mkdir()
    (mount / "cgroup.controllers").write_text("cpu pids\n")
    assert _cgroup.find() == "no cgroup v2 memory controller; no cgroup v1 memory controller"


def test_a_v1_group_has_its_limit(tmp_path: Path) -> None:
    group = _cgroup.Memory(1, tmp_path).group(512 << 20)
    assert group.path.parent == tmp_path
    assert (group.path / "memory.limit_in_bytes").read_text() == str(512 << 20)


def test_each_call_takes_a_user_of_its_own_until_the_pool_is_empty(tmp_path: Path) -> None:
    """Two pools on one host (two respond processes) never hand out the same uid."""
    users, other = Users(tmp_path), Users(tmp_path)
    taken = [users.take() for _ in range(USERS // 2)]
    taken += [other.take() for _ in range(USERS // 2)]
    assert sorted(taken) == list(range(FIRST_UID, FIRST_UID + USERS))
    with pytest.raises(SandboxError, match=f"all {USERS} sandbox users are running calls"):
        users.take()
    other.give_back(taken[-1])  # nothing runs as it: it serves the next call, anyone's
    assert users.take() == taken[-1]
