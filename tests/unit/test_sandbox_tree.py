"""respond/containers/_tree.py on a real folder: what the code may leave (links, FIFOs,
sparse files, hard links, deep folders) is never followed, opened blocking or
miscounted, by the copy (the sandbox's bootstrap) or by the server's reads and writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from respond.containers import _tree

MiB = 1 << 20


def _open(path: Path) -> int:
    return os.open(path, _tree.FOLDER)


def _copy(source: Path, target: Path, budget: _tree.Budget, first: set[str] | None = None) -> None:
    src, dst = _open(source), _open(target)
    try:
        _tree.copy_tree(src, dst, budget, first=first or set())
    finally:
        os.close(src)
        os.close(dst)


def test_a_copy_keeps_regular_files_and_folders_and_counts_the_rest(tmp_path: Path) -> None:
    source, target = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    target.mkdir()
    (tmp_path / "secret").write_text("secret")
    (source / "key").symlink_to(tmp_path / "secret")
    (source / "etc").symlink_to("/etc")
    os.mkfifo(source / "pipe")
    (source / "sub").mkdir()
    (source / "sub" / "a.txt").write_text("a")
    budget = _tree.Budget(bytes=MiB, entries=100, depth=4)
    _copy(source, target, budget)
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*")) == [
        "sub",
        "sub/a.txt",
    ]
    assert budget.special == 3 and not budget.cut


def test_sparse_files_and_hard_links_count_every_byte_of_every_copy(tmp_path: Path) -> None:
    source, target = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    target.mkdir()
    with open(source / "a", "wb") as out:
        out.truncate(4 * MiB)  # sparse: no blocks
    for n in range(3):
        os.link(source / "a", source / f"b{n}")
    budget = _tree.Budget(bytes=8 * MiB, entries=100, depth=4)
    _copy(source, target, budget)
    assert sum(p.stat().st_size for p in target.iterdir()) == 8 * MiB
    assert (budget.files, budget.cut_bytes) == (2, 8 * MiB)


def test_what_the_container_held_goes_first_then_files_then_folders(tmp_path: Path) -> None:
    source, target = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    target.mkdir()
    for name in ("zz-old.txt", "a.txt"):
        (source / name).write_text("x")
    for n in range(5):
        (source / f"d{n}").mkdir()
    budget = _tree.Budget(bytes=MiB, entries=3, depth=4)
    _copy(source, target, budget, first={"zz-old.txt"})
    assert sorted(p.name for p in target.iterdir()) == ["a.txt", "d0", "zz-old.txt"]
    assert (budget.files, budget.folders) == (0, 4)


def test_folders_deeper_than_the_limit_are_cut(tmp_path: Path) -> None:
    source, target = tmp_path / "in", tmp_path / "out"
    (source / "a" / "b" / "c").mkdir(parents=True)
    target.mkdir()
    budget = _tree.Budget(bytes=MiB, entries=100, depth=2)
    _copy(source, target, budget)
    assert (target / "a" / "b").is_dir() and not (target / "a" / "b" / "c").exists()
    assert budget.folders == 1


def test_a_tree_thousands_deep_is_removed(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    top.mkdir()
    fd = _open(top)
    for _ in range(3000):  # deeper than recursion or descriptors would allow
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", _tree.FOLDER, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    parent = _open(tmp_path)
    try:
        _tree.remove_tree(parent, "deep")
    finally:
        os.close(parent)
    assert os.listdir(tmp_path) == []


def test_a_write_replaces_a_link_and_never_follows_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("original")
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "up.txt").symlink_to(victim)
    _tree.write(folder, "up.txt", b"uploaded")
    assert victim.read_text() == "original"
    assert not (folder / "up.txt").is_symlink() and (folder / "up.txt").read_bytes() == b"uploaded"
    assert sorted(os.listdir(folder)) == ["up.txt"]  # nothing left aside


def test_reads_refuse_links_fifos_and_linked_folders_without_blocking(tmp_path: Path) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    (tmp_path / "secret").write_text("secret")
    (folder / "key").symlink_to(tmp_path / "secret")
    (folder / "up").symlink_to(tmp_path)
    os.mkfifo(folder / "pipe")
    for relative in ("key", "pipe", "up/secret", "../secret", "missing"):
        with pytest.raises(OSError):
            _tree.read(folder, relative)
    _tree.unlink(folder, "up/secret")  # through a linked folder: nothing happens
    assert (tmp_path / "secret").read_text() == "secret"
    assert set(_tree.regular_files(folder, 100, 4)) == set()
