"""A loopback package index that shows the upstream index as it was on a date.

Why: the catalog's install commands run real pip (`python -m pip install -e .`), as the
official images do, and pip resolves the build requirements of its isolated build
environment against today's index: a repo whose build backend later dropped a
configuration format it uses no longer builds (REFERENCE section 7). uv has
`--exclude-newer`; pip 24 has nothing of the kind. So a build with an as-of date points
`PIP_INDEX_URL` at this server, which proxies the upstream simple index (PEP 691 JSON)
and drops every file uploaded after the date (PEP 700 `upload-time`). Files without an
upload time are dropped too, as uv does, so the date can never be silently ignored.
pip's build isolation inherits `PIP_INDEX_URL`, so every pip invocation of the build,
nested ones included, sees the index as of the date.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from minisandbox.errors import MinisandboxError

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
_ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
DEFAULT_UPSTREAM = "https://pypi.org/simple/"


class AsOfIndexError(MinisandboxError, ValueError):
    """A date or upstream the as-of index cannot use."""


def parse_date(text: str) -> dt.datetime:
    """An RFC 3339 date-time (`2024-12-02T00:00:00Z`) as an aware datetime."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise AsOfIndexError(f"{text!r} is not an RFC 3339 date-time such as 2024-12-02T00:00:00Z") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _canon(name: str) -> str:
    return "-".join(part for part in name.lower().replace("_", "-").replace(".", "-").split("-") if part)


def project_as_of(upstream: str, project: str, cutoff: dt.datetime) -> dict | None:
    """The upstream's PEP 691 page of `project` without files uploaded after `cutoff`
    (None when the upstream does not know the project)."""
    url = f"{upstream.rstrip('/')}/{urllib.parse.quote(project)}/"
    req = urllib.request.Request(url, headers={"Accept": _ACCEPT})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:  # noqa: S310 (configured index URL)
            ctype = resp.headers.get("Content-Type", "")
            body = resp.read()
            base = resp.geturl()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    if JSON_TYPE not in ctype:
        # an HTML-only index has no upload times: nothing can be shown as of a date
        return {"meta": {"api-version": "1.0"}, "name": project, "files": []}
    data = json.loads(body)
    files = []
    for f in data.get("files") or []:
        stamp = f.get("upload-time")
        if not stamp or parse_date(stamp) > cutoff:
            continue
        files.append({**f, "url": urllib.parse.urljoin(base, f["url"])})
    out = {k: v for k, v in data.items() if k not in ("files", "versions")}
    out["files"] = files
    return out


def render_html(data: dict) -> bytes:
    """PEP 503 HTML for clients that do not ask for JSON."""
    rows = []
    for f in data["files"]:
        hashes = f.get("hashes") or {}
        frag = next((f"#{k}={v}" for k, v in hashes.items()), "")
        attrs = ""
        if f.get("requires-python"):
            attrs += f' data-requires-python="{html.escape(f["requires-python"])}"'
        if f.get("yanked"):
            attrs += ' data-yanked=""'
        rows.append(f'<a href="{html.escape(f["url"] + frag)}"{attrs}>{html.escape(f["filename"])}</a><br/>')
    return ("<!DOCTYPE html><html><body>\n" + "\n".join(rows) + "\n</body></html>\n").encode()


class AsOfIndex:
    """`with AsOfIndex(upstream, "2024-12-02T00:00:00Z") as idx:` serves `idx.url` on
    127.0.0.1 (the build namespace shares the host's network) until the block ends.

    `exempt`: project -> its own cutoff, for exact pins published after the date (the
    resolve step finds them; see `minisandbox.pipeline.resolve`)."""

    def __init__(self, upstream: str, date: str, exempt: Mapping[str, str] | None = None) -> None:
        self.upstream = upstream or DEFAULT_UPSTREAM
        if not self.upstream.startswith(("http://", "https://")):
            raise AsOfIndexError(
                f"index {self.upstream!r}: only http(s) indexes can be shown as of a date; "
                "set PIP_INDEX_URL to an http(s) simple index"
            )
        self.date = date
        self.cutoff = parse_date(date)
        # "false": no cutoff for that project (uv's `--exclude-newer-package name=false`)
        self.exempt = {
            _canon(k): dt.datetime.max.replace(tzinfo=dt.UTC) if v == "false" else parse_date(v)
            for k, v in (exempt or {}).items()
        }
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # the build log stays readable
                pass

            def do_GET(self) -> None:
                outer.requests += 1
                parts = [p for p in urllib.parse.urlsplit(self.path).path.split("/") if p]
                if len(parts) != 2 or parts[0] != "simple":
                    self.send_error(404, "only /simple/<project>/ is served")
                    return
                project = urllib.parse.unquote(parts[1])
                cutoff = outer.exempt.get(_canon(project), outer.cutoff)
                try:
                    data = project_as_of(outer.upstream, project, cutoff)
                except Exception as exc:  # noqa: BLE001 (reported to pip as a bad gateway)
                    self.send_error(502, f"upstream {outer.upstream}: {str(exc)[:200]}")
                    return
                if data is None:
                    self.send_error(404)
                    return
                if JSON_TYPE in (self.headers.get("Accept") or ""):
                    body, ctype = json.dumps(data).encode(), JSON_TYPE
                else:
                    body, ctype = render_html(data), "text/html; charset=utf-8"
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")  # pip's HTTP cache is shared across builds
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/simple/"
        self._thread = threading.Thread(target=self._server.serve_forever, name="asof-index", daemon=True)

    def __enter__(self) -> AsOfIndex:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
