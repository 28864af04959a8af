"""Store freshness: a node refuses a signed index older than one it already accepted.

Why: signatures (minisandbox.node.signing) prove the publisher wrote a document, not that
it is the newest one; whoever can write to the bucket could serve an older signed catalog
or shard (a task set with a since-fixed environment, a withdrawn task). The signed catalog
carries a `sequence` that grows with every publish (`minisandbox.index.next_sequence`) and
the sha256 of every index shard, so a shard cannot be rolled back alone either. A node that
verifies signatures records, per store URL and public key, the highest sequence it accepted
in its node state (`<state_dir()>/store-sequences.json`, under the node cache) and refuses
an older catalog with one line. `--accept-older-store` (or $MINISANDBOX_ACCEPT_OLDER_STORE=1)
accepts it deliberately (a publisher's own rollback) and records it as the new highest.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sys
from pathlib import Path

from minisandbox.fsutil import FileLock, atomic_write_text
from minisandbox.manifest import StoreDataError
from minisandbox.paths import state_dir

#: Set to 1 to accept a store index older than the newest this node accepted.
ACCEPT_OLDER_ENV = "MINISANDBOX_ACCEPT_OLDER_STORE"
STATE_FILE = "store-sequences.json"


class StaleStoreError(StoreDataError):
    """A signed store index older than one this node already accepted (a rollback)."""


def accept_older() -> bool:
    return os.environ.get(ACCEPT_OLDER_ENV, "").strip().lower() in ("1", "yes", "true", "on")


def state_file(state: Path | None = None) -> Path:
    return (state or state_dir()) / STATE_FILE


def _read(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        # only this node writes it; a damaged file must not lock the node out of every store
        print(f"minisandbox: node state {path} is unreadable ({exc}); starting it again", file=sys.stderr)
        return {}
    return data if isinstance(data, dict) else {}


def check_sequence(url: str, key_id: str, sequence: int, *, where: str, state: Path | None = None) -> None:
    """Accept `sequence` (of the catalog at `where`, verified with public key `key_id`) or
    raise StaleStoreError when this node already accepted a higher one from this store.
    Records it when it is the highest so far (or when an older one is accepted
    deliberately). A read and a lock when nothing changes; a write only when it does."""
    path = state_file(state)
    ident = hashlib.sha256(f"{url}\0{key_id}".encode()).hexdigest()[:32]
    seen = _read(path).get(ident)  # written atomically: the usual case (unchanged) needs no lock
    if isinstance(seen, dict) and seen.get("sequence") == sequence:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        data = _read(path)
        seen = data.get(ident) if isinstance(data.get(ident), dict) else None
        highest = int(seen.get("sequence", -1)) if seen else -1
        if sequence == highest:
            return
        if sequence < highest:
            if not accept_older():
                raise StaleStoreError(
                    f"{where}: sequence {sequence} is older than {highest}, which this node accepted on "
                    f"{seen.get('accepted', '?')} (node state {path}): the store was rolled back or replaced by an "
                    f"older copy; re-publish it, or accept it deliberately with `minisandbox --accept-older-store` "
                    f"or {ACCEPT_OLDER_ENV}=1"
                )
            print(
                f"minisandbox: {where}: accepting sequence {sequence}, older than {highest} "
                f"({ACCEPT_OLDER_ENV} is set)",
                file=sys.stderr,
            )
        data[ident] = {
            "url": url,
            "key": key_id,
            "sequence": sequence,
            "accepted": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
