"""The proxy a request to the endpoint goes through, as the environment names it, and what to do
when that proxy fails the request.

httpx reads HTTPS_PROXY, HTTP_PROXY and ALL_PROXY (lowercase first, as ``urllib``'s
``getproxies``) and NO_PROXY, and does not pass over a server on this machine by itself: a proxy
set for the internet takes the requests to ``http://127.0.0.1:8000/v1`` too, unless NO_PROXY
names that host. A proxy that was down was then said as "nothing answers at
http://127.0.0.1:.../chat/completions; start the server, or fix llm.api_base", a running server
and a right address; one that asked for a password (407) as a request the server rejected.
``proxy_for`` picks the proxy as httpx does; the words name it (its password as ``***``), the
variable that set it, and the fix. Pure: it reads a URL and the environment, nothing is sent.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from typing import NamedTuple

from streamrag.config import without_secrets


class Proxy(NamedTuple):
    """A proxy the environment names for a URL."""
    variable: str   # what set it: HTTPS_PROXY, http_proxy, ALL_PROXY ...
    address: str    # its URL, a password in it as ***
    host: str       # the host of the URL it carries requests to (for NO_PROXY's advice)
    no_proxy: str   # NO_PROXY as it is set ("" if not)


def _variable(environ: Mapping[str, str], scheme: str) -> str | None:
    """The variable setting the proxy of ``scheme`` ("http", "https", "all"), as ``getproxies``
    reads them: the lowercase one when set, else any other spelling (HTTPS_PROXY); under CGI
    (REQUEST_METHOD set) an upper-case HTTP_PROXY is a request's header and is not read."""
    wanted = f"{scheme}_proxy"
    if wanted in environ:
        return wanted if environ[wanted] else None   # (an empty lowercase one unsets it)
    if scheme == "http" and "REQUEST_METHOD" in environ:
        return None
    return next((name for name, value in environ.items() if name.lower() == wanted and value), None)


def _bypassed(host: str, port: int | None, scheme: str, no_proxy: str) -> bool:
    """Whether NO_PROXY passes ``host`` over, by httpx's rules: ``*``; an address or localhost
    as written; a name and the names under it (``example.com``, ``.example.com``: under it only);
    a ``scheme://host[:port]``."""
    for entry in (e.strip() for e in no_proxy.split(",")):
        if entry == "*":
            return True
        if not entry:
            continue
        want_scheme, _, entry = entry.rpartition("://")
        if want_scheme not in ("", "all", scheme):
            continue
        name, want_port = entry, None
        if (m := re.fullmatch(r"(.*?):(\d+)", entry)) and not _is_address(entry):
            name, want_port = m.group(1), int(m.group(2))
        if want_port is not None and want_port != port:
            continue
        name = name.strip("[]").lower()
        if _is_address(name) or name == "localhost":
            matched = name == host
        elif name.startswith("."):
            matched = host.endswith(name)
        else:
            matched = host == name or host.endswith(f".{name}")
        if matched:
            return True
    return False


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("/")[0])
    except ValueError:
        return False
    return True


def proxy_for(url: str, environ: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy httpx sends requests to ``url`` through, as ``environ`` (the process's) names
    it; None when it names none, or NO_PROXY passes the host over."""
    import httpx   # (here, not above: ``outage`` says a proxy without loading httpx, 70 ms)

    environ = os.environ if environ is None else environ
    target = httpx.URL(url)
    variable = _variable(environ, target.scheme) or _variable(environ, "all")
    if variable is None:
        return None
    no_variable = _variable(environ, "no")
    no_proxy = environ[no_variable] if no_variable else ""
    host = target.host.lower()
    if _bypassed(host, target.port, target.scheme, no_proxy):
        return None
    address = environ[variable].strip()
    address = address if "://" in address else f"http://{address}"
    return Proxy(variable, without_secrets(address), host, no_proxy)


def loopback(host: str) -> bool:
    """Whether ``host`` is this machine (localhost, 127.x.x.x, ::1)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def through(proxy: Proxy) -> str:
    """How a message names the proxy: ``the proxy http://u:***@host:3128 (set by HTTPS_PROXY)``."""
    return f"the proxy {proxy.address} (set by {proxy.variable})"


def answering(proxy: Proxy | None, url: str) -> Proxy | None:
    """``proxy`` when the HTTP statuses requests to ``url`` get may be its own: an http:// URL's,
    which it forwards; None for an https:// one, tunnelled through it (CONNECT): a status is then
    the server's, and the proxy's refusal of the tunnel none (httpx's ProxyError)."""
    return proxy if proxy is not None and url.partition("://")[0].lower() == "http" else None


def bypass(proxy: Proxy) -> str:
    """The NO_PROXY that passes the proxy over for the endpoint's host, an IPv6 address bare
    (``::1``: httpx takes no ``[::1]`` there, and every client made after it raised InvalidURL)."""
    return f"`export NO_PROXY={proxy.no_proxy + ',' if proxy.no_proxy else ''}{proxy.host}`"


def fix(proxy: Proxy, what: str) -> str:
    """What to do about the proxy: ``what`` (start it, give it a password ...), or fix its
    variable; for a server on this machine, first of all, pass it over (NO_PROXY): a proxy set
    for the internet is the common case, and it has no business with a local server."""
    if loopback(proxy.host):
        return (f"{proxy.host} is this machine, which needs no proxy: {bypass(proxy)}, or unset "
                f"{proxy.variable}; else {what}")
    return what if proxy.variable in what else f"{what}, or fix {proxy.variable}"   # (said once)


def proxy_down(proxy: Proxy, url: str, detail: str) -> str:
    """Why no connection to ``url`` was made, when requests to it go through ``proxy``: the
    proxy is not listening (``detail``, the last try's), not the server; or its own host name
    could not be looked up (``provider_errors.name_unknown``), which was told to "start the
    proxy": its spelling in the variable, or this machine's network, is what to check."""
    from streamrag.provider_errors import name_unknown   # (it loads httpx: not for every command)

    if unknown := name_unknown(proxy.address, detail, proxy.variable):   # ("{address}: the host name ...")
        if loopback(proxy.host):   # (passing it over comes first, as ``fix`` says it)
            return f"requests to {url} go through {through(proxy)}: " + fix(proxy, unknown)
        return f"requests to {url} go through the proxy {unknown}"   # (its variable named in the fix)
    return (f"nothing answers at {through(proxy)} that requests to {url} go through ({detail}); "
            + fix(proxy, "start the proxy"))


def proxy_refused(proxy: Proxy, said: str) -> str:
    """What a proxy's 407 (``said``: its words) says: it wants a user and password, or refused
    the ones in its variable."""
    given = "@" in proxy.address.partition("://")[2]
    what = (f"fix the user and password in {proxy.variable}" if given else
            f"give it a user and password in {proxy.variable} (http://user:password@host:port)")
    return f"{through(proxy)} refused the request, asking for credentials ({said}); " + fix(proxy, what)


def proxy_failed(proxy: Proxy) -> str:
    """The end of a message about a call whose tries met a proxy that broke the connection,
    refused to connect or did not answer in time: the proxy may be at fault, not the server."""
    return f"requests go through {through(proxy)}: check it too; " + fix(proxy, "check the proxy's logs")


def socks_unreachable(environ: Mapping[str, str] | None = None) -> str | None:
    """What to do when httpx cannot make a client for a SOCKS proxy the environment names
    (``socks5://...``: it wants the socksio package, and raised an ImportError, a traceback of
    every command that calls a model); None when none is named."""
    environ = os.environ if environ is None else environ
    for scheme in ("https", "http", "all"):
        variable = _variable(environ, scheme)
        if variable is not None and environ[variable].strip().lower().startswith("socks"):
            return (f"{variable} names a SOCKS proxy ({without_secrets(environ[variable].strip())}), which httpx "
                    f"reaches only with the socksio package, not installed here: `pip install 'httpx[socks]'`, "
                    f"or unset {variable}")
    return None


def unreadable(error: Exception, environ: Mapping[str, str] | None = None) -> str:
    """What to do when httpx cannot read the environment's proxy settings (``error``: its
    words), a proxy's URL (``HTTP_PROXY=http://host:bad``) or a NO_PROXY entry (``[::1]``):
    every command that calls a model ended in a traceback of httpx's InvalidURL."""
    environ = os.environ if environ is None else environ
    names = [name for name in environ if name.lower() in ("https_proxy", "http_proxy", "all_proxy", "no_proxy")
             and environ[name].strip()]
    return (f"the proxy settings of the environment cannot be read ({error}): check "
            f"{', '.join(sorted(names)) or 'HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY'} (a proxy is "
            "http://[user:password@]host:port; NO_PROXY lists hosts, such as 127.0.0.1,localhost,::1), "
            "or unset them")
