"""Loading under a build root (what a server's build reads): every file and folder is resolved,
and any whose real path is outside the root is refused, at every depth — symbolic links to files
and to folders, relative and absolute, and link loops."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from pagerag.errors import InputError
from pagerag.text.load import OutsideRootError, load_sources

PROSE = "It was a bright cold day in April. The clocks were striking thirteen.\n"
SECRET = "The launch code is 0000. Nobody outside may read this line.\n"


@pytest.fixture()
def layout(tmp_path: Path):
    """books/ (the root) with shelf/own.txt, and outside/secret.txt beside it."""
    root = tmp_path / "books"
    (root / "shelf" / "deep").mkdir(parents=True)
    (root / "shelf" / "own.txt").write_text(PROSE)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    return root, outside


def refused(paths, root: Path) -> str:
    with pytest.raises(OutsideRootError) as caught:
        load_sources(paths, root=root)
    message = str(caught.value)
    assert "\n" not in message and "outside" in message
    assert str(root.parent / "outside") not in message  # names the link, never where it points
    return message


@pytest.mark.parametrize("absolute", [True, False], ids=["absolute", "relative"])
def test_a_link_to_an_outside_file_in_a_folder_is_refused(layout, absolute):
    root, outside = layout
    target = outside / "secret.txt" if absolute else Path("../../outside/secret.txt")
    (root / "shelf" / "secret.txt").symlink_to(target)
    assert (root / "shelf" / "secret.txt").read_text() == SECRET  # the link works
    assert "shelf/secret.txt" in refused([root / "shelf"], root)
    refused([root], root)  # from the top of the root too
    assert [d.body for d in load_sources([root / "shelf"])] == [PROSE.strip(), SECRET.strip()]  # no root: the CLI's own files


@pytest.mark.parametrize("absolute", [True, False], ids=["absolute", "relative"])
def test_a_link_to_an_outside_folder_is_refused_at_any_depth(layout, absolute):
    root, outside = layout
    target = outside if absolute else Path("../../../outside")
    (root / "shelf" / "deep" / "more").symlink_to(target, target_is_directory=True)
    assert "shelf/deep/more" in refused([root / "shelf"], root)


def test_a_named_link_that_leaves_the_root_is_refused(layout):
    root, outside = layout
    (root / "direct.txt").symlink_to(outside / "secret.txt")
    refused([root / "direct.txt"], root)
    refused([outside / "secret.txt"], root)  # an outside path named directly


def test_links_that_stay_inside_the_root_are_read_once(layout):
    root, _ = layout
    (root / "alias.txt").symlink_to(Path("shelf/own.txt"))
    (root / "same-shelf").symlink_to(root / "shelf", target_is_directory=True)  # not followed: no loops
    docs = load_sources([root], root=root)
    assert [d.body for d in docs] == [PROSE.strip()]
    assert Path(docs[0].path) == (root / "shelf" / "own.txt").resolve()


def test_link_loops_are_refused_not_followed(layout):
    root, _ = layout
    shelf = root / "shelf"
    (shelf / "loop").symlink_to(Path(".."), target_is_directory=True)  # a folder link to its parent
    assert [d.body for d in load_sources([shelf], root=root)] == [PROSE.strip()]  # ends, reads each file once
    (shelf / "a.txt").symlink_to(Path("b.txt"))
    (shelf / "b.txt").symlink_to(Path("a.txt"))
    with pytest.raises(InputError) as caught:
        load_sources([shelf], root=root)
    assert "loop" in str(caught.value) and "shelf/a.txt" in str(caught.value)


def test_a_dangling_link_is_named(layout):
    root, _ = layout
    (root / "shelf" / "gone.txt").symlink_to(root / "nowhere.txt")
    with pytest.raises(InputError) as caught:
        load_sources([root / "shelf"], root=root)
    assert "shelf/gone.txt" in str(caught.value) and "nothing" in str(caught.value)


def test_a_root_reached_through_a_link_still_confines(layout, tmp_path):
    root, outside = layout
    alias = tmp_path / "alias-of-books"
    os.symlink(root, alias)
    (root / "shelf" / "secret.txt").symlink_to(outside / "secret.txt")
    refused([alias / "shelf"], alias)
