"""Unix socket files the node processes serve gRPC on (the kubelet's device-plugin and DRA
sockets): the path limit, a file's identity (to notice it was replaced) and replacing a stale
socket without ever deleting a file that is not one."""

import os
import stat

MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, one for the terminating NUL

FileId = tuple[int, int, int]  # device, inode, ctime: a re-created file differs in one


def file_id(path: str) -> FileId | None:
    """The file's identity now; None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns)


def too_long(path: str) -> bool:
    return len(os.fsencode(path)) > MAX_SOCKET_PATH


def remove_stale_socket(path: str) -> None:
    """Remove the socket at `path` if there is one; FileExistsError when something else is."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"{path} exists and is not a socket; refusing to replace it")
    os.unlink(path)
