"""Following a server log like tail -F: from its end, across rotation and truncation."""

import os

import pytest

from decodescope.errors import DecodescopeError
from decodescope.serverstats.tail import LogTail


def append(path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def test_starts_at_the_end_and_returns_only_new_whole_lines(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("old line\n")
    tail = LogTail(log)
    assert tail.poll() == []
    append(log, "one\ntw")
    assert tail.poll() == ["one"], "a half-written line waits for its newline"
    append(log, "o\r\n")
    assert tail.poll() == ["two"]


def test_rotation_finishes_the_old_file_then_reads_the_new_one_from_its_start(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    tail = LogTail(log)
    append(log, "last of old\n")
    os.rename(log, tmp_path / "server.log.1")
    assert tail.poll() == ["last of old"], "the new file is not there yet"
    log.write_text("first of new\n")
    assert tail.poll() == ["first of new"]


def test_truncation_in_place_reads_from_the_start_again(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("a fairly long line that was there before\n")
    tail = LogTail(log)
    with open(log, "w") as f:  # copytruncate
        f.write("x\n")
    assert tail.poll() == ["x"]


def test_a_missing_log_is_a_clear_error(tmp_path):
    with pytest.raises(DecodescopeError, match="server log"):
        LogTail(tmp_path / "absent.log")
