"""The worker's end of the judge's channel, checked from outside its process through /proc/PID/fd and fdinfo.

The judge hands a worker three descriptors at fixed numbers: the request pipe's read end, the reply pipe's write
end, and the blob area (a sealed memfd, gauntlet.protocol.Area). Inside its process the candidate can `dup2` a pipe
of its own over the reply descriptor and relay each reply through a thread that rewrites it (the kernels and ops a
call reports, say) before writing it to the judge's pipe through a copy of the real descriptor. So before the judge
accepts a reply it checks that each handed number still refers to the file the judge made (the same pipe inode as
the judge's own end: os.fstat of the judge's end against os.stat of /proc/PID/fd/N), opened the same way (fdinfo
flags), and that no other descriptor of the worker refers to the judge's pipes (a relay's kept copy). A few stat
calls a reply. A descendant's copies are not looked for: a forked process inherits every descriptor of the worker
(os.fork keeps them all), its being alive is `background_work` already (gauntlet.judge.sandbox.tasks), and a relay in
it still needs the worker's own descriptor swapped, which is seen.

What remains: a relay that puts the real descriptor back before each reply and takes it out again only after the
judge has checked (it can poll the request pipe to learn when the next request came), keeping the real end between
replies in flight inside a UNIX socket (SCM_RIGHTS, in no fd table), is seen only by a check that lands while it is
swapped: the judge checks at every reply, once at a random moment during every call, and at every look of its
watchdog (gauntlet.judge.process.watchdog), so a relay swapped for a fraction f of the time escapes n checks with
probability (1 - f)^n, not for certain.

May import: the standard library only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

ACCESS = {os.O_RDONLY: "read-only", os.O_WRONLY: "write-only", os.O_RDWR: "read-write"}


@dataclass(frozen=True)
class Handed:
    number: int          # the descriptor's number in the worker
    what: str            # "request", "reply", "blob area"
    key: tuple           # (st_dev, st_ino) of the file the judge made
    access: int          # os.O_RDONLY, O_WRONLY or O_RDWR, as the worker's end was opened
    pipe: bool


def handed(number: int, what: str, judge_fd: int, access: int) -> Handed:
    """One descriptor handed to the worker as `number`: `judge_fd` is the judge's own descriptor of the same file
    (the other end of the pipe, or the area itself)."""
    st = os.fstat(judge_fd)
    return Handed(number, what, (st.st_dev, st.st_ino), access, (st.st_mode & 0o170000) == 0o010000)


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "(closed)"


def _access(pid: int, number: int) -> int | None:
    try:
        with open(f"/proc/{pid}/fdinfo/{number}") as fh:
            for line in fh:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8) & os.O_ACCMODE
    except (OSError, ValueError, IndexError):
        pass
    return None


class Channel:
    """The descriptors handed to one worker; `check` says how they were tampered with, or None."""

    def __init__(self, fds: list[Handed]):
        self.fds = fds
        self.pipe_links = {f"pipe:[{h.key[1]}]": h for h in fds if h.pipe}

    def check(self, pid: int, closed_ok: bool = False) -> str | None:
        """`pid`: the worker. `closed_ok`: a handed descriptor that is gone is not a finding (a worker closing its
        channel cannot answer, and the judge reads that as a crash); at a reply it is one (the reply came from
        elsewhere)."""
        for h in self.fds:
            path = f"/proc/{pid}/fd/{h.number}"
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if not os.path.isdir(f"/proc/{pid}/fd"):
                    return None             # the worker is gone: its death is judged elsewhere
                if closed_ok:
                    continue
                return f"the {h.what} descriptor (fd {h.number}) was closed, yet a reply came"
            except OSError:
                return None
            if (st.st_dev, st.st_ino) != h.key:
                theirs = f"pipe:[{h.key[1]}]" if h.pipe else f"inode {h.key[1]}"
                return f"the {h.what} descriptor was replaced: fd {h.number} is {_link(path)}, the judge's is {theirs}"
            access = _access(pid, h.number)
            if access is not None and access != h.access:
                return (f"the {h.what} descriptor (fd {h.number}) is open {ACCESS.get(access, access)}, the judge "
                        f"handed it {ACCESS[h.access]}")
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return None
        for name in names:
            link = _link(f"/proc/{pid}/fd/{name}")
            h = self.pipe_links.get(link)
            if h is not None and int(name) != h.number:
                return (f"a second descriptor of the judge's {h.what} pipe ({link}) is open in the worker as fd "
                        f"{name}, besides fd {h.number} (a relay's copy?)")
        return None
