"""bench/conformance.py's classifier of pjdfstest failures, on excerpts of `prove -v`
output of pjdfstest on a `--raw` mount (names shortened)."""

from bench.conformance import causes

# chmod/00.t: chmod through a symlink (refused) is checked on the symlink's target
CHMOD_00 = """/suites/pjdfstest/tests/chmod/00.t ..
1..119
ok 4
not ok 5 - tried 'symlink pjdfstest_bbf pjdfstest_397', expected 0, got EPERM
not ok 6 - tried 'chmod pjdfstest_397 0222', expected 0, got ENOENT
not ok 7 - tried 'stat pjdfstest_397 mode', expected 0222, got ENOENT
not ok 8 - tried 'stat pjdfstest_bbf mode', expected 0222, got 0111
"""
# rmdir/06.t: the FIFO that was to make the directory non-empty is refused
RMDIR_06 = """/suites/pjdfstest/tests/rmdir/06.t ..
not ok 8 - tried 'mkfifo pjdfstest_779/pjdfstest_2d1 0644', expected 0, got EPERM
not ok 9 - tried 'rmdir pjdfstest_779', expected EEXIST|ENOTEMPTY, got 0
not ok 23 - tried 'rmdir pjdfstest_779', expected 0, got ENOENT
"""
# rename/13.t: a directory renamed onto the name a refused FIFO was to have is gone
# from its old name; numbers in a call (times, owners) do not tie later calls to it
RENAME_13 = """/suites/pjdfstest/tests/rename/13.t ..
not ok 7 - tried 'mkfifo pjdfstest_f42 0644', expected 0, got EPERM
not ok 8 - tried 'rename pjdfstest_7a8 pjdfstest_f42', expected ENOTDIR, got 0
not ok 9 - tried 'lstat pjdfstest_7a8 type', expected dir, got ENOENT
not ok 10 - tried 'open . O_RDONLY : utimensat 0 pjdfstest_f42 1980000000 0 0 0 0', expected 0, got ENOENT
"""
# link/00.t: hard links are copies (link count 1, modes changed through one name only)
LINK_00 = """/suites/pjdfstest/tests/link/00.t ..
not ok 5 - tried 'lstat pjdfstest_d73 type,nlink', expected regular,2, got regular,1
not ok 13 - tried 'lstat pjdfstest_d73 type,mode,nlink,uid,gid', expected regular,0201,3,65534,65533, got regular,0644,1,0,0
"""
# unlink/08.t: a TODO test, which prove counts as passed
UNLINK_08 = """/suites/pjdfstest/tests/unlink/08.t ..
1..3
ok 1
not ok 2 # TODO According to POSIX: EPERM - The file named by path is a directory
ok 3
"""


def test_follow_ons_of_special_files_are_special() -> None:
    assert causes(CHMOD_00) == {"special": 4}
    assert causes(RMDIR_06) == {"special": 3}
    assert causes(LINK_00) == {"special": 2}
    assert causes(RENAME_13) == {"special": 4}


def test_todo_failures_are_not_counted() -> None:
    assert causes(UNLINK_08) == {}


def test_other_failures_keep_their_call_and_errno() -> None:
    verbose = CHMOD_00 + "not ok 9 - tried 'chmod pjdfstest_aaa 0755', expected 0, got EACCES\n"
    assert causes(verbose) == {"special": 4, "chmod: expected 0, got EACCES": 1}
    verbose = RENAME_13 + "not ok 11 - tried 'chown pjdfstest_aaa 0 0', expected 0, got EPERM\n"
    assert causes(verbose) == {"special": 4, "chown: expected 0, got EPERM": 1}
