/**
 * Pure parts of the remote-sessions signal: which processes are SSH sessions without a
 * terminal, where they come from and where their forwards go (/proc/net/tcp). Whether their
 * traffic is a person's is traffic-cadence.ts's. docs/signals/remote-sessions.md has the rule and what it was measured on.
 */

/** /proc/PID/io counters the rule needs. */
export interface IoCounters {
  /** Bytes passed to read()-like calls (sockets and pipes included). */
  readBytes: number;
  writtenBytes: number;
  readCalls: number;
  writeCalls: number;
}

/** Parses /proc/PID/io ("rchar: 896\nwchar: 640\nsyscr: 6\n..."). Pure. */
export function parseProcIo(text: string): IoCounters {
  const fields = new Map<string, number>();
  for (const line of text.split("\n")) {
    const match = /^(\w+):\s+(\d+)\s*$/.exec(line);
    if (match) fields.set(match[1]!, Number(match[2]));
  }
  const need = (name: string): number => {
    const value = fields.get(name);
    if (value === undefined || !Number.isSafeInteger(value)) throw new Error(`no ${name} line`);
    return value;
  };
  return { readBytes: need("rchar"), writtenBytes: need("wchar"), readCalls: need("syscr"), writeCalls: need("syscw") };
}

/**
 * The process title sshd gives a session's unprivileged process: "sshd: alice@notty" (a
 * session without a pty), "sshd: alice" (only port forwards, `ssh -N`); OpenSSH 9.8 and later
 * name the binary sshd-session. Terminal sessions ("@pts/3") are the sessions signal's.
 * Returns the user name in the title, or undefined for any other process.
 */
export function sshSessionTitleUser(cmdline: string): string | undefined {
  // setproctitle pads the argv area with NULs or spaces.
  const title = cmdline.replace(/\0+$/, "").replace(/[\0 ]+$/, "");
  const match = /^sshd(?:-session)?: ([a-z_][a-z0-9_.-]{0,63}\$?)(@notty)?$/i.exec(title);
  return match ? match[1] : undefined;
}

/** sshd's privileged monitor for a user's connection: "sshd: alice [priv]". */
export function isSshMonitorTitle(cmdline: string, user: string): boolean {
  const title = cmdline.replace(/[\0 ]+$/, "");
  return (
    /^sshd(?:-session)?: /.test(title) &&
    title.endsWith(` ${user} [priv]`) &&
    title.slice(title.indexOf(": ") + 2, -" [priv]".length) === user
  );
}

/** One TCP socket of /proc/net/tcp or tcp6: its inode, its own and the peer's address. */
export interface TcpSocket {
  inode: number;
  localAddress: string;
  localPort: number;
  remoteAddress: string;
  remotePort: number;
  /** The kernel's state number: 1 established, 10 (0A) listening. */
  state: number;
  /** The socket's owner (the table's uid column); undefined when the line has none. */
  uid?: number;
}

export const TCP_ESTABLISHED = 1;
export const TCP_LISTEN = 10;

/**
 * Parses /proc/net/tcp or /proc/net/tcp6. Pure. Addresses are hex in the kernel's byte order
 * (little-endian 32-bit words on the machines the agent runs on); an IPv4 peer on an IPv6
 * socket (::ffff:a.b.c.d) is written as the IPv4 address. Malformed lines are skipped.
 */
export function parseProcNetTcp(text: string): TcpSocket[] {
  const sockets: TcpSocket[] = [];
  for (const line of text.split("\n").slice(1)) {
    const fields = line.trim().split(/\s+/);
    if (fields.length < 10) continue;
    const inode = Number(fields[9]);
    const local = parseEndpoint(fields[1]!);
    const remote = parseEndpoint(fields[2]!);
    const state = /^[0-9A-F]{2}$/i.test(fields[3]!) ? parseInt(fields[3]!, 16) : undefined;
    if (!local || !remote || state === undefined || !Number.isSafeInteger(inode) || inode <= 0) continue;
    sockets.push({
      inode,
      localAddress: local.address,
      localPort: local.port,
      remoteAddress: remote.address,
      remotePort: remote.port,
      state,
      ...(/^\d+$/.test(fields[7]!) && Number.isSafeInteger(Number(fields[7])) ? { uid: Number(fields[7]) } : {}),
    });
  }
  return sockets;
}

/** "0100007F:1F90" → 127.0.0.1 port 8080; undefined when malformed. */
function parseEndpoint(text: string): { address: string; port: number } | undefined {
  const [hexAddress, hexPort] = text.split(":");
  if (!hexAddress || !hexPort || !/^[0-9A-F]+$/i.test(hexAddress) || !/^[0-9A-F]{4}$/i.test(hexPort)) return undefined;
  const address =
    hexAddress.length === 8 ? ipv4FromHex(hexAddress) : hexAddress.length === 32 ? ipv6FromHex(hexAddress) : undefined;
  return address === undefined ? undefined : { address, port: parseInt(hexPort, 16) };
}

/** Where one of a session's sockets leads: a connection sshd opened for a port forward (`ssh -L`, `-D`). */
export interface ForwardConnection {
  inode: number;
  destinationAddress: string;
  destinationPort: number;
  /** The inode of the listening socket on this machine that accepted it. */
  listenerInode: number;
}

const WILDCARDS = new Set(["0.0.0.0", "::"]);

/**
 * The session's sockets that are forwarded connections to a service on this machine. sshd
 * connects out for a forward, so the socket's peer is a listening socket here (same port, that
 * address or a wildcard); the session's own connection is the other way round: its local port
 * is sshd's listener. A forward to another machine has no listener here and is not returned. Pure.
 */
export function forwardConnections(
  sessionInodes: readonly number[],
  sockets: readonly TcpSocket[],
): ForwardConnection[] {
  const listeners = sockets.filter((socket) => socket.state === TCP_LISTEN);
  const listenerFor = (address: string, port: number): TcpSocket | undefined =>
    listeners.find((l) => l.localPort === port && l.localAddress === address) ??
    listeners.find((l) => l.localPort === port && WILDCARDS.has(l.localAddress));
  const own = new Set(sessionInodes);
  const forwards: ForwardConnection[] = [];
  for (const socket of sockets) {
    if (!own.has(socket.inode) || socket.state !== TCP_ESTABLISHED) continue;
    if (listenerFor(socket.localAddress, socket.localPort)) continue;
    const listener = listenerFor(socket.remoteAddress, socket.remotePort);
    if (!listener) continue;
    forwards.push({
      inode: socket.inode,
      destinationAddress: socket.remoteAddress,
      destinationPort: socket.remotePort,
      listenerInode: listener.inode,
    });
  }
  return forwards;
}

function ipv4FromHex(hex: string): string {
  // One little-endian 32-bit word: "0100007F" is 127.0.0.1.
  const bytes = [6, 4, 2, 0].map((at) => parseInt(hex.slice(at, at + 2), 16));
  return bytes.join(".");
}

function ipv6FromHex(hex: string): string {
  // Four little-endian 32-bit words.
  const bytes: number[] = [];
  for (let word = 0; word < 4; word++) {
    const chunk = hex.slice(word * 8, word * 8 + 8);
    for (const at of [6, 4, 2, 0]) bytes.push(parseInt(chunk.slice(at, at + 2), 16));
  }
  const mapped = bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (mapped) return bytes.slice(12).join(".");
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  // The shortest form (RFC 5952): the longest run of zero groups becomes "::".
  let bestStart = -1;
  let bestLength = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== "0") {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === "0") j++;
    if (j - i > bestLength && j - i > 1) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  if (bestStart < 0) return groups.join(":");
  return `${groups.slice(0, bestStart).join(":")}::${groups.slice(bestStart + bestLength).join(":")}`;
}

/** "socket:[24116]" → 24116. Pure. */
export function socketInode(link: string): number | undefined {
  const match = /^socket:\[(\d+)\]$/.exec(link);
  return match ? Number(match[1]) : undefined;
}

/**
 * The most one read() or write() of a keep-alive moves on the wire: an SSH keep-alive request
 * or its reply is one small packet (52 and 28 bytes measured with chacha20-poly1305; under
 * 96 with every OpenSSH cipher and MAC): a bin of one exchange is not traffic.
 */
export const KEEPALIVE_BYTES_PER_CALL = 96;
/** The ports of the LISTEN sockets among `inodes` (sshd's own descriptors), sorted, once each. Pure. */
/**
 * The ports sshd is configured to listen on: every `Port` line of sshd_config and its included
 * sshd_config.d/*.conf (texts in order), or 22 when none says. Pure.
 */
export function configuredSshdPorts(configTexts: readonly string[]): number[] {
  const ports = new Set<number>();
  for (const text of configTexts)
    for (const match of text.matchAll(/^[ \t]*Port[ \t]+(\d{1,5})[ \t]*$/gim)) {
      const port = Number(match[1]);
      if (port > 0 && port < 65536) ports.add(port);
    }
  return ports.size > 0 ? [...ports].sort((a, b) => a - b) : [22];
}

/** Ports given on sshd's own command line (`-p 2222`, `-o Port=2222`), as its listener's title shows them. Pure. */
export function cmdlineSshdPorts(cmdline: string): number[] {
  const ports: number[] = [];
  for (const match of cmdline.replaceAll("\0", " ").matchAll(/(?:^|\s)(?:-p\s*|-o\s*Port[= ])(\d{1,5})(?=\s|$)/gi)) {
    const port = Number(match[1]);
    if (port > 0 && port < 65536) ports.push(port);
  }
  return ports;
}

/** Root's LISTEN sockets on these ports: sshd's, when root's sshd runs and its descriptors cannot be read. Pure. */
export function rootListeningPorts(sockets: readonly TcpSocket[], ports: readonly number[]): number[] {
  const found = sockets
    .filter((s) => s.state === TCP_LISTEN && s.uid === 0 && ports.includes(s.localPort))
    .map((s) => s.localPort);
  return [...new Set(found)].sort((a, b) => a - b);
}

export function listeningPorts(sockets: readonly TcpSocket[], inodes: ReadonlySet<number>): number[] {
  const ports = sockets.filter((s) => s.state === TCP_LISTEN && inodes.has(s.inode)).map((s) => s.localPort);
  return [...new Set(ports)].sort((a, b) => a - b);
}
