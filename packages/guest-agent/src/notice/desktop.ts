// Desktop notifications, best effort: for each user with a session bus
// (/run/user/UID/bus), run notify-send as that user. Fixed argv, the text is
// one argument, never a shell string. No notify-send or no bus: skipped.
import { execFile } from "node:child_process";
import { access, constants, lstat, readdir } from "node:fs/promises";
import path from "node:path";
import { escapeHtml } from "@ws/protocol";
import type { Users } from "../users.js";

export interface DesktopSession {
  uid: number;
  user: string;
  busPath: string;
}

export interface DesktopCommand {
  file: string;
  args: string[];
  env: Record<string, string>;
}

const SEARCH_PATH = ["/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"];

/**
 * The command that shows one notification in `session`. Pure. The body is markup to most
 * notification servers (the freedesktop spec's body-markup: <b>, <a href>, <img>), so it is
 * escaped: a reason cannot become a link; the summary is plain text by the spec.
 */
export function desktopCommand(
  tools: { runuser: string; notifySend: string },
  session: DesktopSession,
  title: string,
  body: string,
  urgency: "critical" | "normal",
): DesktopCommand {
  return {
    file: tools.runuser,
    args: [
      "-u",
      session.user,
      "--",
      tools.notifySend,
      "--app-name=ws",
      `--urgency=${urgency}`,
      "--icon=dialog-warning",
      "--",
      title,
      escapeHtml(body),
    ],
    env: {
      DBUS_SESSION_BUS_ADDRESS: `unix:path=${session.busPath}`,
      XDG_RUNTIME_DIR: path.dirname(session.busPath),
      PATH: SEARCH_PATH.join(":"),
      LANG: "C.UTF-8",
    },
  };
}

/** Users with a session bus socket under <run>/user/UID/bus whose account is a person's. */
export async function findDesktopSessions(runRoot: string, users: Users): Promise<DesktopSession[]> {
  let names: string[];
  try {
    names = await readdir(path.join(runRoot, "user"));
  } catch {
    return [];
  }
  const sessions: DesktopSession[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const uid = Number(name);
    const user = users.byUid(uid);
    if (!user || !users.isHuman(uid)) continue;
    const busPath = path.join(runRoot, "user", name, "bus");
    try {
      const info = await lstat(busPath);
      if (info.isSocket() && info.uid === uid) sessions.push({ uid, user: user.name, busPath });
    } catch {
      // no bus: no graphical session to notify
    }
  }
  return sessions;
}

export async function findExecutable(name: string): Promise<string | undefined> {
  for (const directory of SEARCH_PATH) {
    const candidate = path.join(directory, name);
    try {
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Runs one notification; resolves with an error text instead of throwing. */
export function runDesktopCommand(command: DesktopCommand, timeoutMs = 5_000): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(
      command.file,
      command.args,
      { env: command.env, timeout: timeoutMs, killSignal: "SIGKILL" },
      (error, _stdout, stderr) => {
        resolve(
          error
            ? `${error.message.split("\n")[0]}${stderr ? `: ${String(stderr).trim().slice(0, 200)}` : ""}`
            : undefined,
        );
      },
    );
  });
}
