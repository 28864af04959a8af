"""Attack: drive the sandbox's own helpers, which run outside the payloads' confinement.

The attack that worked: a payload made a FIFO, waited until the controller was asked to
read it, found init's file-open helper blocked on it (uid 0, dumpable, no seccomp filter,
no rlimits), attached with ptrace and ran syscalls through it: `unshare(CLONE_NEWUSER)`
returned 0 and `add_key` reached the host's root keyring; rootless, the same helper (driven
with `gdb -p`) had no rlimits at all.

What holds now, as root and rootless: the controller's file operations refuse a FIFO at
once (they never block); a payload that catches a helper (SIGSTOP on every process init
forks, as an attacker would, to look at it at leisure) finds it non-dumpable (ptrace,
/proc/PID/mem and process_vm_readv all refused, even in a sandbox that allows ptrace),
under seccomp (init's filter, then the payloads'), without capabilities and with the
sandbox's rlimits; init itself is the same. Payloads cannot ptrace at all unless the
sandbox allows it (`ptrace=True`), and then only each other.
"""

from __future__ import annotations

import pytest

from tests.security.conftest import MODES

#: Runs in the sandbox: stop every process init forks (a helper), look at it, let it go.
SCANNER = r'''
import ctypes, errno, json, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()

class IOV(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def fields(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out

def probe(pid):
    st = fields(pid)
    ptr = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
    perr = ctypes.get_errno()
    if ptr == 0:
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
    try:
        os.close(os.open(f"/proc/{pid}/mem", os.O_RDONLY))
        mem = "opened"
    except OSError as exc:
        mem = errno.errorcode[exc.errno]
    buf = ctypes.create_string_buffer(8)
    local, remote = IOV(ctypes.addressof(buf), 8), IOV(0x400000, 8)
    vm = libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    verr = ctypes.get_errno()
    limits = open(f"/proc/{pid}/limits").read()
    cpu = [l.split()[3] for l in limits.splitlines() if l.startswith("Max cpu time")][0]
    aspace = [l.split()[3] for l in limits.splitlines() if l.startswith("Max address space")][0]
    return {"ptrace": ptr, "ptrace_errno": errno.errorcode.get(perr, perr), "mem": mem,
            "vm": vm, "vm_errno": errno.errorcode.get(verr, verr), "seccomp": st.get("Seccomp"),
            "filters": st.get("Seccomp_filters"), "nnp": st.get("NoNewPrivs"), "capeff": st.get("CapEff"),
            "cpu_rlimit": cpu, "as_rlimit": aspace}

found, init = [], probe(1)
open("/tmp/scanner.ready", "w").close()
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline and not any(f["filters"] == "2" for f in found):
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        pid = int(name)
        try:
            if fields(pid).get("PPid") != "1" or b"rootfs.py" not in open(f"/proc/{pid}/cmdline", "rb").read():
                continue
            os.kill(pid, signal.SIGSTOP)
        except OSError:
            continue
        try:
            found.append(probe(pid))
        except (OSError, IndexError):
            pass
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
json.dump({"init": init, "helpers": found}, open("/tmp/scan.json", "w"))
'''

BODY = """
    import time
    lim = Limits.default().with_settings("cpu=77")
    with Sandbox([Layer(P["repo"], "/testbed")], limits=lim, ptrace=True) as sb:
        sb.write_file("/tmp/scanner.py", P["scanner"])
        assert sb.run(["mkfifo", "/tmp/fifo"]).returncode == 0
        t = time.monotonic()
        try:
            sb.read_file("/tmp/fifo")
            out["fifo"] = "read"
        except OSError as exc:
            out["fifo"] = str(exc)
        out["fifo_seconds"] = time.monotonic() - t
        cid = sb.spawn(["python3", "/tmp/scanner.py", "40"], stdout=-3, stderr=-3)
        while sb.run(["test", "-e", "/tmp/scanner.ready"]).returncode:
            time.sleep(0.05)
        errors = []
        while sb.poll(cid) is None:  # feed it helpers until it has looked at one
            try:
                sb.read_file("/testbed/README")
            except OSError as exc:
                errors.append(str(exc))
        out["scan"] = json.loads(sb.read_file("/tmp/scan.json"))
        out["errors"] = errors[:3]
        out["rlimits_cpu"] = sb.rlimits.get("RLIMIT_CPU")
        out["rlimits_as"] = sb.rlimits.get("RLIMIT_AS")  # the rlimit fallback of the memory limit (rootless)
    # payloads and ptrace: off by default, each other's with ptrace=True
    probe = ("import ctypes, os, time, errno\\n"
             "libc = ctypes.CDLL(None, use_errno=True)\\n"
             "pid = os.fork()\\n"
             "if pid == 0:\\n"
             "    time.sleep(5); os._exit(0)\\n"
             "r = libc.ptrace(16, pid, 0, 0); e = ctypes.get_errno()\\n"
             "print(r, errno.errorcode.get(e, e)); os.kill(pid, 9)\\n")
    for allow in (False, True):
        with Sandbox([Layer(P["repo"], "/testbed")], ptrace=allow) as sb:
            out[f"payload_ptrace_{allow}"] = sb.run(["python3", "-c", probe]).output.split()
"""


@pytest.mark.parametrize("attack", MODES, indirect=True)
def test_helpers_cannot_be_driven_by_a_payload(attack) -> None:
    (attack.repo / "README").write_text("hello\n")
    out = attack(BODY, scanner=SCANNER)
    assert out["fifo"].endswith("is a FIFO: only regular files and directories are read or written"), out["fifo"]
    assert out["fifo_seconds"] < 1.0, out
    scan = out["scan"]
    helpers = scan["helpers"]
    assert helpers, f"the scanner caught no helper in 40 s: {out}"
    for proc in [scan["init"], *helpers]:
        # non-dumpable: same uid, a sandbox that allows ptrace, and still no way in
        assert proc["ptrace"] == -1 and proc["ptrace_errno"] == "EPERM", proc
        assert proc["mem"] in ("EACCES", "EPERM"), proc
        assert proc["vm"] == -1 and proc["vm_errno"] == "EPERM", proc
        assert proc["seccomp"] == "2", proc  # init's filter from before the first payload
    ready = [h for h in helpers if h["filters"] == "2"]  # past its set-up (the payloads' filter is last)
    assert ready, helpers
    for h in ready:  # a payload's confinement: no capabilities, no_new_privs, the sandbox's rlimits
        assert h["capeff"] == "0000000000000000" and h["nnp"] == "1", h
        assert h["cpu_rlimit"] == "77" and out["rlimits_cpu"] == 77, h
    if out["rlimits_as"]:  # memory by RLIMIT_AS: init and its helpers are held to it too
        for proc in [scan["init"], *ready]:
            assert proc["as_rlimit"] == str(out["rlimits_as"]), proc
    assert out["payload_ptrace_False"] == ["-1", "EPERM"], out
    assert out["payload_ptrace_True"][0] == "0", out
