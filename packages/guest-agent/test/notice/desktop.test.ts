import { chown, mkdir, mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { desktopCommand, findDesktopSessions } from "../../src/notice/desktop.js";
import { usersFrom } from "../../src/users.js";

const users = usersFrom([
  { name: "alice", uid: 1001, gid: 1001, home: "/home/alice", shell: "/bin/bash" },
  { name: "bob", uid: 1002, gid: 1002, home: "/home/bob", shell: "/bin/bash" },
  { name: "gdm", uid: 120, gid: 120, home: "/var/lib/gdm3", shell: "/bin/false" },
]);

const cleanup: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

describe("desktop notifications", () => {
  it("runs notify-send as the user with their session bus; the text is an argument, never shell", () => {
    const command = desktopCommand(
      { runuser: "/usr/sbin/runuser", notifySend: "/usr/bin/notify-send" },
      { uid: 1001, user: "alice", busPath: "/run/user/1001/bus" },
      "ws: this VM will stop in 10 minutes (at 14:32)",
      'Why: $(rm -rf ~); `reboot` <a href="https://evil.example/">keep it</a>',
      "critical",
    );
    expect(command.file).toBe("/usr/sbin/runuser");
    expect(command.args).toEqual([
      "-u",
      "alice",
      "--",
      "/usr/bin/notify-send",
      "--app-name=ws",
      "--urgency=critical",
      "--icon=dialog-warning",
      "--",
      "ws: this VM will stop in 10 minutes (at 14:32)",
      "Why: $(rm -rf ~); `reboot` &lt;a href=&quot;https://evil.example/&quot;&gt;keep it&lt;/a&gt;",
    ]);
    expect(command.env.DBUS_SESSION_BUS_ADDRESS).toBe("unix:path=/run/user/1001/bus");
    expect(command.env.XDG_RUNTIME_DIR).toBe("/run/user/1001");
  });

  it("finds sessions by a bus socket the user owns under /run/user/UID", async () => {
    const run = await mkdtemp(path.join(os.tmpdir(), "ws-desktop-"));
    cleanup.push(() => rm(run, { recursive: true, force: true }));
    const servers: Server[] = [];
    cleanup.push(async () => {
      for (const server of servers) await new Promise((resolve) => server.close(resolve));
    });
    const bind = async (uid: number, owner: number): Promise<void> => {
      const dir = path.join(run, "user", String(uid));
      await mkdir(dir, { recursive: true });
      const server = createServer();
      servers.push(server);
      await new Promise<void>((resolve) => server.listen(path.join(dir, "bus"), resolve));
      await chown(path.join(dir, "bus"), owner, owner);
    };
    await bind(1001, 1001); // alice: a session
    await bind(1002, 0); // bob's dir, but a bus someone else owns: not trusted
    await bind(120, 120); // the display manager: not a person
    await mkdir(path.join(run, "user", "1003"), { recursive: true }); // no bus: no graphical session
    expect(await findDesktopSessions(run, users)).toEqual([
      { uid: 1001, user: "alice", busPath: path.join(run, "user", "1001", "bus") },
    ]);
    expect(await findDesktopSessions(path.join(run, "missing"), users)).toEqual([]);
  });
});
