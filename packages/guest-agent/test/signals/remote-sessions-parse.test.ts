import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  INTERACTION_PAYLOAD_BYTES,
  isInteraction,
  isSshMonitorTitle,
  listeningPorts,
  parseListeningSockets,
  parseProcIo,
  parseProcNetTcp,
  payloadBytes,
  socketInode,
  sshSessionTitleUser,
} from "../../src/signals/remote-sessions-parse.js";

const fixture = (name: string) => readFileSync(new URL(`../fixtures/remote-sessions/${name}`, import.meta.url), "utf8");

describe("remote-sessions parsers", () => {
  it("finds the LISTEN sockets of /proc/net/tcp with their local port, and keeps those of sshd's descriptors", () => {
    const sockets = parseListeningSockets(fixture("net-tcp"));
    expect(sockets).toHaveLength(12);
    expect(sockets[0]).toEqual({ inode: 98758, port: 0xb1f5 });
    // Established sockets (st 01) are not listeners.
    expect(parseListeningSockets(fixture("net-tcp")).every((s) => s.inode > 0)).toBe(true);
    expect(parseListeningSockets(fixture("net-tcp6"))).toEqual([]);
    expect(listeningPorts(sockets, new Set([98758, 24932, 98758, 1]))).toEqual([0xa4e8, 0xb1f5]);
    expect(parseListeningSockets("header\n  0: garbage\n  1: 0100007F:ZZZZ 00000000:0000 0A a b c d e f 5\n")).toEqual(
      [],
    );
  });

  it("reads /proc/PID/io counters and refuses a file without them", () => {
    expect(parseProcIo(fixture("sshd-listener.io"))).toEqual({
      readBytes: 579438,
      writtenBytes: 139954,
      readCalls: 1379,
      writeCalls: 381,
    });
    expect(() => parseProcIo("rchar: 1\nwchar: 2\n")).toThrow(/no syscr line/);
  });

  it("knows sshd's titles: sessions without a pty and port forwards, not terminals or monitors", () => {
    expect(sshSessionTitleUser(fixture("session-notty.cmdline"))).toBe("wstest16a");
    expect(sshSessionTitleUser(fixture("session-forward.cmdline"))).toBe("wstest16a");
    expect(sshSessionTitleUser("sshd-session: bob@notty\0")).toBe("bob");
    expect(sshSessionTitleUser(fixture("session-pty.cmdline"))).toBeUndefined();
    expect(sshSessionTitleUser(fixture("monitor.cmdline"))).toBeUndefined();
    expect(sshSessionTitleUser("python3\0-m\0http.server\0")).toBeUndefined();
    expect(sshSessionTitleUser("sshd: ../../etc@notty")).toBeUndefined();
    expect(isSshMonitorTitle(fixture("monitor.cmdline"), "wstest16a")).toBe(true);
    expect(isSshMonitorTitle(fixture("monitor.cmdline"), "wstest16")).toBe(false);
    expect(isSshMonitorTitle("sshd: mallory wstest16a [priv]", "wstest16a")).toBe(false);
  });

  it("names the peer of a socket from /proc/net/tcp and tcp6, skipping bad lines", () => {
    const v4 = parseProcNetTcp(fixture("net-tcp"));
    expect(v4.length).toBeGreaterThan(5);
    expect(v4.every((socket) => /^\d+\.\d+\.\d+\.\d+$/.test(socket.remoteAddress))).toBe(true);
    expect(parseProcNetTcp(fixture("net-tcp6"))).toEqual([
      { inode: 54321, remoteAddress: "127.0.0.1", remotePort: 0xd2a4 },
      { inode: 54322, remoteAddress: "2001:db8::5", remotePort: 0xe1f0 },
    ]);
    expect(parseProcNetTcp("header\n   0: 0100007F:0016 0F02000A:C350 01 0:0 0:0 0 1000 0 777 1\n")).toEqual([
      { inode: 777, remoteAddress: "10.0.2.15", remotePort: 50000 },
    ]);
    expect(socketInode("socket:[24116]")).toBe(24116);
    expect(socketInode("pipe:[25190]")).toBeUndefined();
  });

  // Deltas measured on this machine's OpenSSH 9.2 over 10 s (docs/signals/remote-sessions.md).
  const at = (readBytes: number, writtenBytes: number, readCalls: number, writeCalls: number) => ({
    readBytes,
    writtenBytes,
    readCalls,
    writeCalls,
  });
  const zero = at(0, 0, 0, 0);

  it("keep-alives are not interaction, an IDE-sized exchange is", () => {
    expect(payloadBytes(zero, at(572, 308, 11, 11))).toBe(0); // ServerAliveInterval=1 only
    expect(payloadBytes(zero, at(520, 280, 10, 10))).toBe(0); // ssh -N -L with keep-alives
    expect(isInteraction(zero, at(10605, 10533, 16, 16))).toBe(true); // 1 KiB every 2 s through cat
    expect(isInteraction(zero, at(265, 265, 10, 10))).toBe(false); // a 9-byte line every 2 s: below the rule
    expect(payloadBytes(zero, at(INTERACTION_PAYLOAD_BYTES + 96, 0, 1, 0))).toBe(INTERACTION_PAYLOAD_BYTES);
  });

  it("a counter that went backwards (pid reused) is no traffic", () => {
    expect(payloadBytes(at(5000, 5000, 10, 10), at(100, 100, 1, 1))).toBe(0);
  });
});
