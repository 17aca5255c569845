// Who is looking at a page: the identity the site's auth proxy (oauth2-proxy, an Ingress with
// external auth, a Gateway's ext-authz) puts in a request header. The collector authenticates no
// one itself; it believes exactly one configured header, and only from the proxies it is told
// to trust when it is told any (anyone who reaches the port directly could set the header).
import type http from "node:http";
import { BlockList, isIP } from "node:net";
import { errorMessage, terminalText } from "@ws/protocol";

export interface IdentityConfig {
  /** The header carrying the signed-in user's name (oauth2-proxy: X-Auth-Request-User). */
  userHeader: string;
  /** A header with the user's groups, comma-separated (oauth2-proxy: X-Auth-Request-Groups). */
  groupsHeader?: string;
  /** Members of these groups see every VM; everyone else sees only the VMs they own. */
  adminGroups: string[];
  /** Addresses or CIDRs of the proxies whose header is believed; empty: any peer (the port must then be reachable only through the proxy). */
  trustedProxies: string[];
}

export interface Viewer {
  user: string;
  groups: string[];
  admin: boolean;
}

/** Longest user or group name believed; a header is the proxy's, but the bound is the collector's. */
const MAX_NAME_CHARS = 128;
const MAX_GROUPS = 64;

const headerValue = (headers: http.IncomingHttpHeaders, name: string): string | undefined => {
  const value = headers[name.toLowerCase()];
  return Array.isArray(value) ? value[0] : value;
};

const cleanName = (text: string): string | undefined => {
  const trimmed = text.trim();
  // Names are shown on pages and in logs and compared with labels: no separators of their own, and
  // nothing terminalText would change (a control, C1 included, a bidi or zero-width character).
  return trimmed &&
    trimmed.length <= MAX_NAME_CHARS &&
    /^[^\s,;<>"'\\]+$/.test(trimmed) &&
    terminalText(trimmed, MAX_NAME_CHARS) === trimmed
    ? trimmed
    : undefined;
};

/**
 * The signed-in viewer, or undefined when the request carries no believable identity (no header,
 * an empty or malformed one, or one from a peer that is not a trusted proxy).
 */
export function viewerFromHeaders(
  headers: http.IncomingHttpHeaders,
  config: IdentityConfig | undefined,
  peerAddress?: string,
): Viewer | undefined {
  if (!config) return undefined;
  if (config.trustedProxies.length > 0 && !isTrustedPeer(config, peerAddress)) return undefined;
  const user = cleanName(headerValue(headers, config.userHeader) ?? "");
  if (!user) return undefined;
  const groups = config.groupsHeader
    ? (headerValue(headers, config.groupsHeader) ?? "")
        .split(",")
        .slice(0, MAX_GROUPS)
        .map(cleanName)
        .filter((group): group is string => group !== undefined)
    : [];
  return { user, groups, admin: groups.some((group) => config.adminGroups.includes(group)) };
}

/**
 * Whether a request's proxy-set headers (X-Forwarded-Host) are believed: only with http.identity
 * configured with trustedProxies, and only from one of them. Unlike the identity header, an empty
 * list trusts no one here: Host is what a gateway sends by default, and nothing needs more.
 */
export function fromTrustedProxy(config: IdentityConfig | undefined, peerAddress: string | undefined): boolean {
  return config !== undefined && config.trustedProxies.length > 0 && isTrustedPeer(config, peerAddress);
}

/** Whether the viewer may see (and act on) a VM with this owner: its owner, or an admin. */
export function mayView(viewer: Viewer, owner: string | undefined): boolean {
  return viewer.admin || (owner !== undefined && owner !== "" && owner === viewer.user);
}

const blockLists = new WeakMap<IdentityConfig, BlockList>();

function isTrustedPeer(config: IdentityConfig, peerAddress: string | undefined): boolean {
  if (!peerAddress) return false;
  let list = blockLists.get(config);
  if (!list) {
    list = trustedProxyList(config.trustedProxies);
    blockLists.set(config, list);
  }
  const address =
    peerAddress.startsWith("::ffff:") && isIP(peerAddress.slice(7)) === 4 ? peerAddress.slice(7) : peerAddress;
  const family = isIP(address);
  return family !== 0 && list.check(address, family === 4 ? "ipv4" : "ipv6");
}

/** The trusted proxies as a BlockList; throws with the entry named when one is not an address or CIDR. */
export function trustedProxyList(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = "", prefixText] = entry.split("/");
    const family = isIP(address);
    const prefix = prefixText === undefined ? (family === 4 ? 32 : 128) : Number(prefixText);
    if (family === 0 || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128))
      throw new Error(`"${entry}" is not an IP address or CIDR such as 10.0.0.0/8`);
    list.addSubnet(address, prefix, family === 4 ? "ipv4" : "ipv6");
  }
  return list;
}

/** Parses the `http.identity` section; problems are pushed, the result is undefined when absent. */
export function parseIdentityConfig(raw: unknown, problems: string[], where: string): IdentityConfig | undefined {
  if (raw == null) return undefined;
  if (typeof raw !== "object" || Array.isArray(raw)) {
    problems.push(
      `${where}: expected a mapping with userHeader (and optionally groupsHeader, adminGroups, trustedProxies)`,
    );
    return undefined;
  }
  const section = raw as Record<string, unknown>;
  for (const key of Object.keys(section))
    if (!["userHeader", "groupsHeader", "adminGroups", "trustedProxies"].includes(key))
      problems.push(`${where}: unknown key "${key}" (known: userHeader, groupsHeader, adminGroups, trustedProxies)`);
  const header = (key: string): string | undefined => {
    const value = section[key];
    if (value == null) return undefined;
    if (typeof value === "string" && /^[A-Za-z0-9-]{1,64}$/.test(value)) return value;
    problems.push(`${where}.${key}: "${String(value).slice(0, 40)}" is not an HTTP header name`);
    return undefined;
  };
  const list = (key: string): string[] => {
    const value = section[key];
    if (value == null) return [];
    if (Array.isArray(value) && value.every((entry) => typeof entry === "string")) return value as string[];
    problems.push(`${where}.${key}: expected a list of strings`);
    return [];
  };
  const userHeader = header("userHeader");
  if (!userHeader && section.userHeader == null)
    problems.push(`${where}.userHeader: required (the header your auth proxy sets, e.g. X-Auth-Request-User)`);
  const groupsHeader = header("groupsHeader");
  const trustedProxies = list("trustedProxies");
  try {
    trustedProxyList(trustedProxies);
  } catch (error) {
    problems.push(`${where}.trustedProxies: ${errorMessage(error)}`);
  }
  return {
    userHeader: userHeader ?? "X-Auth-Request-User",
    ...(groupsHeader ? { groupsHeader } : {}),
    adminGroups: list("adminGroups"),
    trustedProxies,
  };
}
