/**
 * Pseudo-terminals for tests, driven through node-pty the way a terminal emulator drives them:
 * keystrokes in, screen output out.
 *
 * Who owns a /dev/pts entry: devpts gives a new pts the uid of the process that opened
 * /dev/ptmx. node-pty opens it in the test process (root), so a shell it starts as another user
 * (its uid option, su, setpriv) still sits on a root-owned pts. A user's own terminal program
 * (tmux, screen, an IDE, Jupyter's terminado, util-linux `script`) opens the pts as that user.
 * spawnUserTerminal() reproduces the latter with `script`, which is in every Debian system.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import pty from "node-pty";
import type { IPty } from "node-pty";

const execFileAsync = promisify(execFile);

export interface PtySession {
  readonly pty: IPty;
  /** The test-side pts node-pty opened ("/dev/pts/4"). */
  readonly ptsName: string;
  /** Everything the terminal printed so far. */
  output(): string;
  write(text: string): void;
  /** Resolves when the output (from `from` on) matches; rejects with the output so far on timeout. */
  waitFor(pattern: string | RegExp, options?: { timeoutMs?: number; from?: number }): Promise<RegExpMatchArray>;
  /** Asks the shell in the terminal which tty it is on ("/dev/pts/7"). */
  shellTty(options?: { timeoutMs?: number }): Promise<string>;
  readonly exited: Promise<{ exitCode: number; signal?: number }>;
  /** Kills the process group behind the terminal and waits for it to go. */
  close(): Promise<void>;
}

export interface SpawnPtyOptions {
  env?: Record<string, string>;
  cwd?: string;
  cols?: number;
  rows?: number;
}

const DEFAULT_ENV = { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8", TERM: "xterm-256color" };

export function spawnPty(file: string, args: string[], options: SpawnPtyOptions = {}): PtySession {
  const terminal = pty.spawn(file, args, {
    name: "xterm-256color",
    cols: options.cols ?? 120,
    rows: options.rows ?? 40,
    cwd: options.cwd ?? "/",
    env: { ...DEFAULT_ENV, ...options.env },
  });
  let output = "";
  const listeners = new Set<() => void>();
  terminal.onData((data) => {
    output += data;
    for (const listener of listeners) listener();
  });
  let hasExited = false;
  const exited = new Promise<{ exitCode: number; signal?: number }>((resolve) =>
    terminal.onExit((event) => {
      hasExited = true;
      for (const listener of listeners) listener();
      resolve(event);
    }),
  );

  const session: PtySession = {
    pty: terminal,
    ptsName: (terminal as unknown as { ptsName?: string }).ptsName ?? "",
    output: () => output,
    write: (text) => terminal.write(text),
    exited,
    waitFor(pattern, { timeoutMs = 30_000, from = 0 } = {}) {
      const matcher = typeof pattern === "string" ? new RegExp(escapeRegExp(pattern)) : pattern;
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          const match = output.slice(from).match(matcher);
          if (match) {
            finish();
            resolve(match);
            return true;
          }
          if (hasExited) {
            finish();
            reject(new Error(`terminal exited before printing ${matcher}; output:\n${output}`));
            return true;
          }
          return false;
        };
        const timer = setTimeout(() => {
          finish();
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${matcher}; output:\n${output}`));
        }, timeoutMs);
        const finish = () => {
          clearTimeout(timer);
          listeners.delete(listener);
        };
        const listener = () => void check();
        listeners.add(listener);
        check();
      });
    },
    async shellTty({ timeoutMs = 30_000 } = {}) {
      const marker = `WS${Math.random().toString(36).slice(2, 8)}`;
      const from = output.length;
      // The echoed command line holds "$(tty)" literally, so only the printed answer matches.
      terminal.write(`echo ${marker}=$(tty)\r`);
      const match = await session.waitFor(new RegExp(`${marker}=(/dev/[\\w/]+)`), { timeoutMs, from });
      return match[1]!;
    },
    async close() {
      if (hasExited) return;
      try {
        // Negative pid: the whole session node-pty created (ssh, script and the shell inside).
        process.kill(-terminal.pid, "SIGHUP");
      } catch {
        // Already gone.
      }
      const gone = await Promise.race([exited.then(() => true), delay(5_000).then(() => false)]);
      if (!gone) {
        try {
          process.kill(-terminal.pid, "SIGKILL");
        } catch {
          // Already gone.
        }
        await Promise.race([exited, delay(5_000)]);
      }
    },
  };
  return session;
}

/**
 * A shell on a pts that `user` owns, as tmux or an IDE terminal gives: `script` runs as the
 * user and opens the inner pseudo-terminal itself. No utmp record is written for it.
 */
export async function spawnUserTerminal(user: string, options: SpawnPtyOptions = {}): Promise<PtySession> {
  for (const [binary, pkg] of [
    ["/usr/bin/setpriv", "util-linux"],
    ["/usr/bin/script", "bsdutils"],
    ["/bin/bash", "bash"],
  ] as const) {
    if (!existsSync(binary)) throw new Error(`${binary} is missing: install the Debian package ${pkg}`);
  }
  const home = await userHome(user);
  return spawnPty(
    "/usr/bin/setpriv",
    // The command string is fixed: nothing from the test reaches script's shell.
    [
      `--reuid=${user}`,
      `--regid=${user}`,
      "--init-groups",
      "--",
      "/usr/bin/script",
      "--quiet",
      "--flush",
      "--command",
      "/bin/bash --noprofile --norc -i",
      "/dev/null",
    ],
    { cwd: home, ...options, env: { HOME: home, USER: user, SHELL: "/bin/bash", PS1: "$ ", ...options.env } },
  );
}

async function userHome(user: string): Promise<string> {
  const { stdout } = await execFileAsync("getent", ["passwd", user]);
  const home = stdout.trim().split(":")[5];
  if (!home) throw new Error(`getent passwd ${user}: no home directory in ${JSON.stringify(stdout)}`);
  return home;
}

/** Polls `probe` until it returns a value that is not undefined; rejects with `description` on timeout. */
export async function pollUntil<T>(
  description: string,
  probe: () => Promise<T | undefined> | T | undefined,
  { timeoutMs = 60_000, intervalMs = 250 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const reason = lastError instanceof Error ? `: last error ${lastError.message}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}${reason}`);
    }
    await delay(intervalMs);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
