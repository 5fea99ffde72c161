"""The key of a client's address, as the server helpers' default key and
fields read it (the JS helpers' ipKey, the ASGI middleware's ip_key): an
IPv6 address is its network of `ipv6_subnet` bits, an IPv4-mapped one its
IPv4 address, anything else the key as it is.

The model is Python's own ipaddress module, which the JS binding's parser
(bindings-node/lib/api/addresses.cjs) shares no code with: the same client
gets the same key in both bindings (a Redis limiter shared across languages)
only if that parser reads exactly what ipaddress reads and writes exactly
its canonical text. The file is read by the server tests of both bindings
(tests/js/ip-key.test.cjs, bindings-python/tests/test_asgi.py), not by the
limiters' runners: it lives in server/.
"""
from __future__ import annotations

import ipaddress
from typing import Optional

# Every address is keyed with each of these; None keys each address whole.
SUBNETS: list[Optional[int]] = [1, 48, 56, 64, 100, 127, 128, None]


def key(address: str, subnet: Optional[int]) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address  # no address at all: a host name, a test client's
    if ip.version == 4:
        return address
    assert isinstance(ip, ipaddress.IPv6Address)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    plain = ipaddress.IPv6Address(int(ip))  # without its zone id
    if subnet is None:
        return str(plain)
    return str(ipaddress.IPv6Network((plain, subnet), strict=False))


# (what the case is, address)
ADDRESSES = [
    ("IPv6, eight groups", "2001:db8:1234:5678:9abc:def0:1234:5678"),
    ("IPv6, a /56 sibling of the one above", "2001:db8:1234:56ff::1"),
    ("IPv6, the next /56", "2001:db8:1234:5700::1"),
    ("IPv6, '::' in the middle", "2001:db8::1"),
    ("IPv6, full 8-group form with leading zeros", "2001:0db8:0000:0000:0000:ff00:0042:8329"),
    ("IPv6, upper-case hex", "2001:DB8:ABCD:EF01::FFFF"),
    ("IPv6, full form, every group set", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ("IPv6, a single zero group is not compressed", "1:2:3:4:5:6:0:8"),
    ("IPv6, the longest zero run is compressed", "1:0:0:2:0:0:0:3"),
    ("IPv6, of equal zero runs the first", "1:0:0:2:3:0:0:4"),
    ("IPv6, zeros at the end", "1:2::"),
    ("IPv6, zeros at the start", "::2:3"),
    ("IPv6, '::' standing for one group", "1:2:3:4:5:6::8"),
    ("IPv6, the unspecified address", "::"),
    ("IPv6, loopback", "::1"),
    ("IPv6, link-local with a zone id", "fe80::1%eth0"),
    ("IPv6, a zone id holding a colon", "fe80::abcd:1%en:0"),
    ("IPv6, a unique local address", "fd00::2"),
    ("IPv4-mapped", "::ffff:1.2.3.4"),
    ("IPv4-mapped, upper case", "::FFFF:203.0.113.7"),
    ("IPv4-mapped, in hex", "::ffff:102:304"),
    ("IPv4-mapped, full form", "0:0:0:0:0:ffff:c000:0280"),
    ("IPv4-mapped, with a zone id", "::ffff:127.0.0.1%lo"),
    ("IPv4-compatible (not mapped): IPv6", "::1.2.3.4"),
    ("an IPv4 tail after six groups", "64:ff9b:1:2:3:4:198.51.100.9"),
    ("IPv4", "203.0.113.7"),
    ("IPv4 loopback", "127.0.0.1"),
    ("a host name: Starlette's TestClient", "testclient"),
    ("a host name", "localhost"),
    ("empty", ""),
    ("not IPv6: two '::'", "1::2::3"),
    ("not IPv6: nine groups", "1:2:3:4:5:6:7:8:9"),
    ("not IPv6: seven groups without '::'", "1:2:3:4:5:6:7"),
    ("not IPv6: eight groups and '::'", "1:2:3:4::5:6:7:8"),
    ("not IPv6: a lone leading colon", ":1:2:3:4:5:6:7"),
    ("not IPv6: a lone trailing colon", "1:2:3:4:5:6:7:"),
    ("not IPv6: ':::'", ":::"),
    ("not IPv6: a group of five digits", "12345::1"),
    ("not IPv6: a group of five digits, zeros", "00000::1"),
    ("not IPv6: no hex digit", "g::1"),
    ("not IPv6: a sign", "+1::1"),
    ("not IPv6: a non-ASCII digit", "\u0661::1"),
    ("not IPv6: a space", " ::1"),
    ("not IPv6: a prefix length", "2001:db8::/32"),
    ("not IPv6: brackets", "[::1]"),
    ("not IPv6: an empty zone id", "fe80::1%"),
    ("not IPv6: two zone ids", "fe80::1%a%b"),
    ("not IPv6: a host and port", "example.com:8080"),
    ("not IPv6: an IPv4 tail of three octets", "::ffff:1.2.3"),
    ("not IPv6: an IPv4 tail with a leading zero", "::ffff:01.2.3.4"),
    ("not IPv6: an IPv4 tail octet above 255", "::ffff:1.2.3.256"),
    ("not IPv6: an IPv4 tail that is not last", "::1.2.3.4:1"),
    ("not IPv6: an IPv4 tail after seven groups", "1:2:3:4:5:6:7:1.2.3.4"),
    ("not IPv4 (a leading zero): as it is", "01.2.3.4"),
]


def scenarios() -> list[dict]:
    out = []
    for what, address in ADDRESSES:
        for subnet in SUBNETS:
            name = f"{what}, ipv6_subnet {subnet}"
            out.append({"name": name, "address": address, "ipv6_subnet": subnet, "key": key(address, subnet)})
    return out


FILES = [("server", "ip_keys.json", "The key of a client's address: ipKey (JS) and ip_key (Python), and the server helpers' defaults.", scenarios)]
