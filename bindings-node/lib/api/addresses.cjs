'use strict';
// How the server helpers (server.cjs) key a client by its address: an IPv6
// client by its network, as the ASGI middleware's ip_key does. Plain
// functions, as values.cjs: this file is shared with the WebAssembly build,
// which runs in browsers and workers, so it parses addresses itself rather
// than ask node:net.
const { invalidType, invalidValue } = require('./values.cjs');

/**
 * The default `ipv6Subnet`: a /56, what RFC 6177 recommends giving a home
 * (ISPs hand out /48 to /64; a /64 is the least a single host gets), within
 * which a client may take a new address at will, each a fresh key were
 * addresses keyed whole. express-rate-limit's default too.
 */
const IPV6_SUBNET = 56;

/** `value`'s type, for a message: `typeof`, but null for null. */
const kindOf = (value) => (value === null ? 'null' : typeof value);

/**
 * `ipv6Subnet` checked: a prefix length from 1 to 128, or null for `false`
 * (each address whole); the ASGI middleware's errors for the same mistakes.
 */
function subnetOf(ipv6Subnet) {
  if (ipv6Subnet === false) return null;
  if (typeof ipv6Subnet !== 'number') invalidType(`\`ipv6Subnet\` must be a number or false, not ${kindOf(ipv6Subnet)}`);
  if (!(Number.isInteger(ipv6Subnet) && ipv6Subnet >= 1 && ipv6Subnet <= 128)) {
    invalidValue(`\`ipv6Subnet\` must be a prefix length from 1 to 128, not ${ipv6Subnet}`);
  }
  return ipv6Subnet;
}

/**
 * The key of a client at `address` (a string): an IPv6 address is its
 * network of `ipv6Subnet` bits (default 56) in canonical text,
 * `2001:db8:1234:5600::/56`, or with `false` the address itself in
 * canonical text; an IPv4-mapped one (`::ffff:1.2.3.4`, what Node reports for
 * an IPv4 client of a server listening on `::`) its IPv4 address, `1.2.3.4`;
 * a zone id (`fe80::1%eth0`) is dropped. Anything else (an IPv4 address, a
 * host name) is the key as it is. Exactly the ASGI middleware's `ip_key`,
 * so that a client has one key in both bindings (a Redis limiter shared
 * across languages).
 */
function ipKey(address, ipv6Subnet = IPV6_SUBNET) {
  const subnet = subnetOf(ipv6Subnet);
  if (typeof address !== 'string') invalidType(`\`address\` must be a string, not ${kindOf(address)}`);
  return addressKey(address, subnet);
}

/** ipKey, its `subnet` checked (null: whole addresses). */
function addressKey(address, subnet) {
  // No IPv6 address lacks a colon: an IPv4 client (most, and the hot path) costs this test alone.
  if (!address.includes(':')) return address;
  const words = ipv6Words(address);
  if (words === null) return address;
  if (words[0] === 0 && words[1] === 0 && words[2] === 0 && words[3] === 0 && words[4] === 0 && words[5] === 0xffff) {
    return `${words[6] >> 8}.${words[6] & 0xff}.${words[7] >> 8}.${words[7] & 0xff}`;
  }
  if (subnet === null) return compressed(words);
  for (let i = 0; i < 8; i++) {
    const bits = Math.min(Math.max(subnet - 16 * i, 0), 16);
    words[i] &= (0xffff << (16 - bits)) & 0xffff;
  }
  return `${compressed(words)}/${subnet}`;
}

const HEXTET = /^[0-9A-Fa-f]{1,4}$/;
const OCTET = /^(?:0|[1-9][0-9]{0,2})$/;

/**
 * The eight 16-bit words of the IPv6 address `text`, or null if it is none:
 * what Python's ipaddress.IPv6Address takes, no more (an address one
 * binding read and the other not would be two keys): hex words of 1 to 4
 * digits, one `::` for a run of zero words, an IPv4 tail
 * (`::ffff:1.2.3.4`, decimal octets without leading zeros), a zone id after
 * `%` (not empty, no second `%`), and no `/` anywhere.
 */
function ipv6Words(text) {
  if (text.includes('/')) return null;
  let address = text;
  const percent = text.indexOf('%');
  if (percent !== -1) {
    const zone = text.slice(percent + 1);
    if (zone === '' || zone.includes('%')) return null;
    address = text.slice(0, percent);
  }
  const parts = address.split(':');
  if (parts.length < 3) return null;
  if (parts[parts.length - 1].includes('.')) {
    const octets = parts.pop().split('.');
    if (octets.length !== 4 || !octets.every((octet) => OCTET.test(octet) && Number(octet) <= 255)) return null;
    const [a, b, c, d] = octets.map(Number);
    parts.push(((a << 8) | b).toString(16), ((c << 8) | d).toString(16));
  }
  if (parts.length > 9) return null;
  // An empty part between others is the `::`; at either end, its half.
  let skip = -1;
  for (let i = 1; i < parts.length - 1; i++) {
    if (parts[i] !== '') continue;
    if (skip !== -1) return null;
    skip = i;
  }
  let high = parts.length;
  let low = 0;
  if (skip !== -1) {
    high = skip;
    low = parts.length - skip - 1;
    if (parts[0] === '' && --high !== 0) return null;
    if (parts[parts.length - 1] === '' && --low !== 0) return null;
    if (high + low > 7) return null;
  } else if (parts.length !== 8) {
    return null;
  }
  const given = [...parts.slice(0, high), ...parts.slice(parts.length - low)];
  if (!given.every((part) => HEXTET.test(part))) return null;
  const words = given.map((part) => parseInt(part, 16));
  words.splice(high, 0, ...new Array(8 - words.length).fill(0));
  return words;
}

/**
 * The eight `words` as RFC 5952 writes them, and Python's ipaddress: lower
 * case hex without leading zeros, the longest run of two or more zero words
 * (the first of equal runs) written `::`.
 */
function compressed(words) {
  let start = -1;
  let length = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let end = i;
    while (end < 8 && words[end] === 0) end++;
    if (end - i > length) [start, length] = [i, end - i];
    i = end;
  }
  const hex = words.map((word) => word.toString(16));
  if (start === -1) return hex.join(':');
  return `${hex.slice(0, start).join(':')}::${hex.slice(start + length).join(':')}`;
}

module.exports = { IPV6_SUBNET, subnetOf, ipKey, addressKey };
