import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  forwardConnections,
  isSshMonitorTitle,
  listeningPorts,
  parseProcIo,
  parseProcNetTcp,
  socketInode,
  sshSessionTitleUser,
} from "../../src/signals/remote-sessions-parse.js";

const fixture = (name: string) => readFileSync(new URL(`../fixtures/remote-sessions/${name}`, import.meta.url), "utf8");

describe("remote-sessions parsers", () => {
  it("names the ports of the LISTEN sockets among sshd's own descriptors", () => {
    const sockets = parseProcNetTcp(fixture("net-tcp"));
    const listeners = sockets.filter((s) => s.state === 10);
    expect(listeners).toHaveLength(12);
    expect(listeners[0]).toMatchObject({ inode: 98758, localPort: 0xb1f5 });
    expect(listeningPorts(sockets, new Set([98758, 24932, 98758, 1]))).toEqual([0xa4e8, 0xb1f5]);
    expect(listeningPorts(parseProcNetTcp(fixture("net-tcp6")), new Set([98758]))).toEqual([]);
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
    expect(
      parseProcNetTcp(fixture("net-tcp6")).map(({ inode, remoteAddress, remotePort }) => ({
        inode,
        remoteAddress,
        remotePort,
      })),
    ).toEqual([
      { inode: 54321, remoteAddress: "127.0.0.1", remotePort: 0xd2a4 },
      { inode: 54322, remoteAddress: "2001:db8::5", remotePort: 0xe1f0 },
    ]);
    expect(parseProcNetTcp("header\n   0: 0100007F:0016 0F02000A:C350 01 0:0 0:0 0 1000 0 777 1\n")).toEqual([
      {
        inode: 777,
        localAddress: "127.0.0.1",
        localPort: 22,
        remoteAddress: "10.0.2.15",
        remotePort: 50000,
        state: 1,
        uid: 1000,
      },
    ]);
    expect(socketInode("socket:[24116]")).toBe(24116);
    expect(socketInode("pipe:[25190]")).toBeUndefined();
  });

  it("finds where a session's forward goes: the listening socket its connection reaches", () => {
    // Captured by bench/capture-traffic.ts: the poller-10s session (`ssh -N -L`) 15 s in,
    // its fd links and the /proc/net/tcp lines of its sockets and of the listener's port.
    const meta = JSON.parse(fixture("forward-meta.json")) as { destinationPort: number };
    const sessionInodes = fixture("forward-session.fd")
      .split("\n")
      .map((line) => socketInode(line.split(" ")[1] ?? ""))
      .filter((inode): inode is number => inode !== undefined);
    const listenerInodes = fixture("forward-listener.fd")
      .split("\n")
      .map((line) => socketInode(line.split(" ")[1] ?? ""));
    const sockets = [...parseProcNetTcp(fixture("forward-net-tcp")), ...parseProcNetTcp(fixture("forward-net-tcp6"))];
    const forwards = forwardConnections(sessionInodes, sockets);
    expect(forwards).toHaveLength(1);
    expect(forwards[0]).toMatchObject({ destinationAddress: "127.0.0.1", destinationPort: meta.destinationPort });
    // The listening socket is the HTTP server's (its own fd list holds it).
    expect(listenerInodes).toContain(forwards[0]!.listenerInode);
    // The session's own connection (its local port is sshd's listener) is not a forward, nor
    // is the server's side of the forwarded connection.
    const listen = (port: number, inode: number, address = "0.0.0.0") => ({
      inode,
      localAddress: address,
      localPort: port,
      remoteAddress: "0.0.0.0",
      remotePort: 0,
      state: 10,
    });
    const established = (inode: number, local: [string, number], remote: [string, number]) => ({
      inode,
      localAddress: local[0],
      localPort: local[1],
      remoteAddress: remote[0],
      remotePort: remote[1],
      state: 1,
    });
    expect(
      forwardConnections(
        [1, 2, 3],
        [
          listen(22, 100),
          listen(8888, 101, "127.0.0.1"),
          established(1, ["10.0.2.15", 22], ["10.0.2.2", 8888]),
          established(2, ["127.0.0.1", 40000], ["127.0.0.1", 8888]),
          established(3, ["10.0.2.15", 40001], ["192.0.2.7", 443]),
          established(4, ["127.0.0.1", 8888], ["127.0.0.1", 40000]),
        ],
      ),
    ).toEqual([{ inode: 2, destinationAddress: "127.0.0.1", destinationPort: 8888, listenerInode: 101 }]);
  });
});
