/**
 * Is this agent stream coming from the VM it claims to be? (pure) In Kubernetes a VM's traffic
 * leaves through its virt-launcher pod (masquerade NAT or bridge), so the stream's source address
 * must be one of that pod's IPs. Peer strings come in several shapes: grpc-js's getPeer()
 * ("10.0.0.5:43120", "::ffff:10.0.0.5:43120", "fd00::5:43120"), gRPC core's ("ipv4:10.0.0.5:43120",
 * "ipv6:[::1]:5000") and bracketed ("[::1]:5000"); IPv4-mapped IPv6 equals its IPv4 address.
 */
import { isIP } from "node:net";

export interface PeerAddress {
  ip: string;
  port: number | null;
}

/** The canonical text of an IP address (IPv6 compressed and lower case, mapped IPv4 as IPv4), or null. */
export function normalizeIp(raw: string): string | null {
  let ip = raw.trim();
  if (ip.startsWith("[") && ip.endsWith("]")) ip = ip.slice(1, -1);
  const zone = ip.indexOf("%");
  if (zone >= 0) ip = ip.slice(0, zone);
  const version = isIP(ip);
  if (version === 4)
    return ip
      .split(".")
      .map((octet) => String(Number(octet)))
      .join(".");
  if (version !== 6) return null;
  const canonical = new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(canonical);
  if (mapped) {
    const high = parseInt(mapped[1]!, 16);
    const low = parseInt(mapped[2]!, 16);
    return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  }
  return canonical;
}

function port(text: string): number | null {
  if (!/^\d{1,5}$/.test(text)) return null;
  const n = Number(text);
  return n <= 65535 ? n : null;
}

export function parsePeerAddress(peer: string): PeerAddress | null {
  let text = peer.trim();
  const scheme = /^(ipv4|ipv6):/i.exec(text);
  if (scheme) text = text.slice(scheme[0].length);
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  if (bracketed) {
    const ip = normalizeIp(bracketed[1]!);
    return ip ? { ip, port: bracketed[2] !== undefined ? port(bracketed[2]) : null } : null;
  }
  const lastColon = text.lastIndexOf(":");
  if (lastColon > 0) {
    // grpc-js always appends the port, so "host:port" is tried before a bare IPv6 address.
    const host = normalizeIp(text.slice(0, lastColon));
    const p = port(text.slice(lastColon + 1));
    if (host && p !== null) return { ip: host, port: p };
  }
  const bare = normalizeIp(text);
  return bare ? { ip: bare, port: null } : null;
}

export type PeerIdentityVerdict = { ok: true; ip: string } | { ok: false; reason: string };

/**
 * Accepts the stream when its source IP is one of the VM's launcher pod IPs
 * (`InventoryVm.launcherPodIps`). No known pod IP is a refusal: the VM is not running, or the
 * collector has not seen its pod yet.
 */
export function checkPeerIdentity(
  peer: string,
  vm: { namespace: string; name: string },
  launcherPodIps: readonly string[],
): PeerIdentityVerdict {
  const address = parsePeerAddress(peer);
  if (!address) return { ok: false, reason: `cannot read an IP address from peer ${JSON.stringify(peer)}` };
  const expected = launcherPodIps.map(normalizeIp).filter((ip): ip is string => ip !== null);
  if (expected.length === 0) {
    return { ok: false, reason: `no running virt-launcher pod with an IP is known for VM ${vm.namespace}/${vm.name}` };
  }
  if (expected.includes(address.ip)) return { ok: true, ip: address.ip };
  return {
    ok: false,
    reason: `connection from ${address.ip} but VM ${vm.namespace}/${vm.name} runs in a virt-launcher pod at ${expected.join(", ")}`,
  };
}
