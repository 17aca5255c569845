import { describe, expect, it } from "vitest";
import {
  cmdlineSshdPorts,
  configuredSshdPorts,
  parseProcNetTcp,
  rootListeningPorts,
} from "../../src/signals/remote-sessions-parse.js";

// /proc/net/tcp as a Debian guest shows it: root's sshd on 22, a user's Jupyter on 8888, a connection.
const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 13845 1 0000000000000000 100 0 0 10 0
   1: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 22011 1 0000000000000000 100 0 0 10 0
   2: 0F02000A:0016 0202000A:C2C4 01 00000000:00000000 02:000A3B7E 00000000     0        0 23770 4 0000000000000000 20 4 29 10 -1
`;

describe("sshd's ports without its descriptors (the packaged unit has no CAP_SYS_PTRACE)", () => {
  it("the configured ports, 22 by default; Port lines of sshd_config and its drop-ins", () => {
    expect(configuredSshdPorts([])).toEqual([22]);
    expect(configuredSshdPorts(["# Port 2200\nInclude /etc/ssh/sshd_config.d/*.conf\n"])).toEqual([22]);
    expect(configuredSshdPorts(["Port 2222\n", "  port 22\n"])).toEqual([22, 2222]);
    expect(configuredSshdPorts(["Port 99999\n"])).toEqual([22]);
  });

  it("ports on sshd's command line, as its listener's title shows them", () => {
    expect(cmdlineSshdPorts("sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups")).toEqual([]);
    expect(
      cmdlineSshdPorts(
        "sshd: /usr/sbin/sshd -D -e -f /tmp/x/sshd_config -p 38437 -o ListenAddress=127.0.0.1 [listener]",
      ),
    ).toEqual([38437]);
    expect(cmdlineSshdPorts("/usr/sbin/sshd\0-D\0-oPort=2222\0")).toEqual([2222]);
    expect(cmdlineSshdPorts("/usr/sbin/sshd -o Port 2200")).toEqual([2200]);
  });

  it("root's LISTEN sockets on those ports, never a user's listener or a connection", () => {
    const sockets = parseProcNetTcp(TCP);
    expect(sockets.map((s) => s.uid)).toEqual([0, 1000, 0]);
    expect(rootListeningPorts(sockets, [22])).toEqual([22]);
    expect(rootListeningPorts(sockets, [8888])).toEqual([]);
    expect(rootListeningPorts(sockets, [2222])).toEqual([]);
  });
});
