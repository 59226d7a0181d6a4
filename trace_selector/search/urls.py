"""Canonical page URLs, so two spellings of one page compare equal.

Browsing graphs link evidence across trajectories through page identity (DESIGN §Graph), and agents
write the same URL in many ways (``HTTPS://EN.Wikipedia.org/wiki/Tomato#History``,
``https://en.wikipedia.org/wiki/%54omato``). `canonical_url` applies the RFC 3986 §6.2.2
syntax-based normalisations that cannot change which resource is meant:

- scheme and host lowercased, the default port (80 for http, 443 for https) dropped;
- an empty path of an http(s) URL becomes ``/``;
- the fragment dropped (it selects a part of the page, not another page); the query kept;
- percent-escapes of unreserved characters (``A-Z a-z 0-9 - . _ ~``) decoded, every other escape
  kept with uppercase hex digits (``%2f`` -> ``%2F``: decoding it would change the path);
- characters that may not appear raw in a URI (spaces, non-ASCII) percent-encoded as UTF-8, so an
  IRI (``/wiki/Bogotá``) and its URI form (``/wiki/Bogot%C3%A1``) agree.

A string without a scheme (a bare title or id) is returned stripped and otherwise unchanged.
"""

from __future__ import annotations

import re
from urllib.parse import quote

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_DEFAULT_PORTS = {"http": "80", "https": "443"}
# Characters allowed raw in a URI path, query or host besides unreserved ones (RFC 3986 §2.2 reserved
# set plus '%', which starts an escape we handle separately).
_SAFE = "!#$&'()*+,/:;=?@[]%"


def _fix_escapes(text: str) -> str:
    def repl(m: re.Match[str]) -> str:
        ch = chr(int(m.group(1), 16))
        return ch if ch in _UNRESERVED else "%" + m.group(1).upper()

    # Encode raw characters first ('%' is safe so existing escapes survive), then normalise escapes.
    return _ESCAPE.sub(repl, quote(text, safe=_SAFE))


def canonical_url(url: str) -> str:
    """Normal form of `url` (see the module docstring); strings without a scheme pass through."""
    url = url.strip()
    m = _SCHEME.match(url)
    if not m or url[m.end() : m.end() + 2] != "//":
        return url
    scheme = m.group(1).lower()
    rest = url[m.end() + 2 :]
    rest = rest.split("#", 1)[0]
    cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, _, hostport = authority.rpartition("@")
    host, port = hostport, ""
    # A trailing ":digits" is a port unless the host is an IPv6 literal without one ("[::1]").
    pm = re.match(r"^(.*?)(?::(\d*))?$", hostport)
    if pm and not hostport.endswith("]"):
        host, port = pm.group(1), pm.group(2) or ""
    host = _fix_escapes(host).lower()
    if port == _DEFAULT_PORTS.get(scheme) or port == "":
        port_part = ""
    else:
        port_part = ":" + port
    if not tail.startswith("/") and scheme in _DEFAULT_PORTS:
        tail = "/" + tail
    user_part = _fix_escapes(userinfo) + "@" if userinfo else ""
    return f"{scheme}://{user_part}{host}{port_part}{_fix_escapes(tail)}"


def wiki_url(title: str, base: str = "https://en.wikipedia.org/wiki/") -> str:
    """Canonical English Wikipedia URL of an article title (spaces become underscores)."""
    # Quote the title first: a '?' or '%' in a title is part of the path, not a query or an escape.
    path = quote(title.strip().replace(" ", "_"), safe="!$&'()*+,/:;=@")
    return canonical_url(base + path)
